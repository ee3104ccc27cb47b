// Package httpretrytest helps test code that calls HTTP upstreams through
// an httpretry.Transport, or any http.Client: it fakes an upstream that
// fails in exactly the way a test asks, records what the upstream saw of
// every attempt, and checks the properties a retrying client must keep.
//
// It has two fake upstreams, both http.RoundTrippers to use as the
// Transport's Base (or as any client's Transport), both free of sockets
// and of real time, so that tests run inside a testing/synctest bubble,
// where backoff waits and Retry-After delays pass on a fake clock:
//
//   - [Script] plays a sequence of [Outcome] values: statuses with headers
//     and bodies, network errors ([ConnReset], [DialRefused], [Timeout]),
//     slow bodies, bodies that fail half-way, answers that come late.
//   - [HandlerTransport] serves an http.Handler in memory, streaming both
//     bodies, for a fake that needs logic of its own.
//
// Both record every request as a [Request] (method, URL, header, body,
// attempt number, idempotency key, time, and what was answered), which the
// Check functions read: [CheckAttempts], [CheckSameKey], [CheckSameBody],
// [CheckBodiesClosed], [CheckDiscardedClosed]. They take a [TB], the two
// methods of testing.TB they need, and report with t.Errorf, so they work
// with any assertion style.
//
//	func TestChargeSurvivesTwo503s(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			upstream := httpretrytest.NewScript(
//				httpretrytest.Status(503),
//				httpretrytest.Status(503),
//				httpretrytest.Respond(201, `{"id":"ch_1"}`),
//			)
//			client := &http.Client{Transport: &httpretry.Transport{Base: upstream}}
//			if _, err := Charge(t.Context(), client, 1999); err != nil {
//				t.Fatal(err)
//			}
//			reqs := upstream.Requests()
//			httpretrytest.CheckAttempts(t, reqs, 3)
//			httpretrytest.CheckSameKey(t, reqs)
//			httpretrytest.CheckSameBody(t, reqs)
//		})
//	}
//
// The package needs nothing beyond the standard library and httpretry
// itself (for the attempt number), and can serve tests of code that does
// not use httpretry at all. To inject faults into real traffic, in a
// staging rehearsal, use package chaos instead.
package httpretrytest
