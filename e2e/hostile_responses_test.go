package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
)

// drained checks a case whose server sends a 503 with a body too long to
// drain: the transport reads at most 64 KiB of it, closes it, and the retry
// succeeds. What the server managed to write before its connection closed
// is bounded by the socket buffers, not by the body.
func drained(t *testing.T, o *hostileOutcome) {
	o.requireStatus(t, 200, 2, httpretry.StopSuccess)
	if n := o.h.count(o.h.written, o.id); n > 32<<20 {
		t.Errorf("the server wrote %d MiB of the discarded body: the drain is not bounded", n>>20)
	}
	figure(t, "Hostile responses", "discarded 503 body (%s): the server could write %.1f MiB before the client closed the connection; the retry came after %v",
		o.h.bodyKind(o.id), float64(o.h.count(o.h.written, o.id))/(1<<20), o.elapsed.Round(time.Millisecond))
}

func (h *hostileServer) bodyKind(id string) string {
	for _, k := range []string{"huge", "endless"} {
		if strings.Contains(id, "("+k+")") {
			return k
		}
	}
	return "?"
}

func TestHostileResponses(t *testing.T) {
	runHostile(t, "Hostile responses", []hostileCase{
		{name: "503 with a 100 MiB body (huge)", policy: fastPolicy, req: get("/huge"), want: drained},
		{name: "503 with a body that never ends (endless)", policy: fastPolicy, req: get("/endless"), want: drained},
		{name: "503 promising 1000 bytes, sending 5", policy: fastPolicy, req: get("/liecl"),
			want: func(t *testing.T, o *hostileOutcome) { o.requireStatus(t, 200, 2, httpretry.StopSuccess) }},
		{name: "an answer that is not HTTP", policy: fastPolicy, req: get("/garbage"),
			want: func(t *testing.T, o *hostileOutcome) { o.requireErr(t, nil, 3, httpretry.StopAttempts) }},
		{name: "503 with a body of one byte per 50 ms (trickle), AttemptTimeout 200ms, caller's deadline 3s",
			policy:  withAttemptTimeout(fastPolicy, 200*time.Millisecond),
			timeout: 3 * time.Second, req: get("/trickle"),
			want: func(t *testing.T, o *hostileOutcome) {
				// This case found that the drain of a discarded response was
				// bounded in bytes but not in time: a trickling body held the
				// call until the caller's deadline. The drain is now cut after
				// 250 ms, and the retry succeeds.
				var re *httpretry.RetryError
				switch {
				case o.resp != nil && o.resp.StatusCode == 200:
					figure(t, "Hostile responses", "trickling 503 body: the drain was cut short in time, retry after %v", o.elapsed.Round(time.Millisecond))
				case errors.As(o.err, &re) && errors.Is(o.err, context.DeadlineExceeded):
					figure(t, knownProblems, "the drain of a discarded response is bounded in bytes (64 KiB) but not in time: a 503 whose body trickles (1 byte / 50 ms) held the call until the caller's 3s deadline (%v, %q); AttemptTimeout (200ms) does not bound it, and a caller without a deadline waits until 64 KiB have trickled in",
						o.elapsed.Round(time.Millisecond), re.Stop)
					{ // a regression of a fixed bug
						t.Errorf("the drain of a trickling body took %v: want it bounded by AttemptTimeout", o.elapsed)
					}
				default:
					t.Errorf("response %v, error %v", o.resp != nil, o.err)
				}
			}},
	})
}

func withAttemptTimeout(p httpretry.Policy, d time.Duration) httpretry.Policy {
	p.AttemptTimeout = d
	return p
}
