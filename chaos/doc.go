// Package chaos injects HTTP faults on purpose, into a chosen share of the
// requests that match a rule, so that a team can rehearse an upstream's
// failures in staging (or in a test) and watch its client cope.
//
// A [Transport] wraps the RoundTripper that sends requests. Put it under
// httpretry, as the Transport's Base, so that each attempt meets the faults
// on its own, as it would meet a flaky network:
//
//	flaky := &chaos.Transport{
//		Next: http.DefaultTransport,
//		Seed: 42,
//		Rules: []chaos.Rule{
//			{Name: "503s", Host: "payments.internal", Rate: 0.01, Fault: chaos.Status(503)},
//			{Name: "slow", PathPrefix: "/v1/search", Rate: 0.05, Fault: chaos.Latency(800 * time.Millisecond)},
//		},
//	}
//	client := &http.Client{Transport: &httpretry.Transport{Base: flaky}}
//
// Each [Rule] names the requests it applies to (host, method, path prefix,
// or any predicate), the share of them to fail (Rate), and the [Fault]:
// [Status], [RetryAfter], [Respond], [Latency], [Reset], [Refuse],
// [Timeout], [Truncate], a [Chain] of them, or a function of your own. The
// rules are tried in order, each drawing on its own for the requests that
// reach it; a fault that answers ends the request there, one that passes the
// request on (Latency, Reset, Truncate) hands it to the next rule.
//
// Injection is switched at run time with [Transport.SetEnabled], and per
// request with Rule.If. While disabled, a Transport adds nothing to a
// request but one atomic load: no allocation, no lock. Its random draws
// come from a source seeded with Transport.Seed, so a run that sends the
// same requests in the same order injects the same faults.
//
// The design follows Polly's chaos strategies (Simmy) for .NET: the four
// kinds of chaos (faults, outcomes, latency, behaviour) are here the error
// faults, the response faults, Latency, and a Fault function of your own;
// its injection rate is Rate, its enabled generator is SetEnabled and
// Rule.If. Like github/go-fault, a rule selects requests by path and draws
// from a seeded source; unlike go-fault, which is server middleware, a
// Transport sits in the client, so one process can rehearse the failures
// of every upstream it calls.
package chaos
