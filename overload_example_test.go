package httpretry_test

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/httpretrytest"
)

// Pacing by the rate limit a host announces: once GitHub says no request
// is left before the reset, the next call is refused at the client, with
// ErrRateLimited, instead of being sent to collect a 403 or 429. Without
// PaceFailFast it would wait for the reset (within MaxRetryAfter and the
// caller's deadline) and then be sent.
func ExampleOverloadPolicy() {
	upstream := httpretrytest.NewScript(httpretrytest.Status(http.StatusOK).
		Header("X-RateLimit-Remaining", "0").
		Header("X-RateLimit-Reset", "600")) // seconds from now: below 10⁸, as HintPolicy.ResetHeader says
	tr := &httpretry.Transport{
		Base: upstream,
		Policy: httpretry.Policy{
			Overload: httpretry.OverloadPolicy{Pace: true, PaceFailFast: true},
			Hints:    httpretry.HintPolicy{ResetHeader: "X-RateLimit-Reset", RemainingHeader: "X-RateLimit-Remaining"},
		},
		OnCall: func(c httpretry.Call) { fmt.Println("call stopped:", c.Stop, "- attempts:", c.Attempts) },
	}
	client := &http.Client{Transport: tr}
	for range 2 {
		resp, err := client.Get("https://api.github.com/user")
		if err != nil {
			fmt.Println("refused locally:", errors.Is(err, httpretry.ErrRateLimited))
			continue
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	s := tr.Stats()[0]
	fmt.Println(s.Host, "requests left:", s.Pacing.Remaining, "refused:", s.Pacing.Refusals, "sent:", len(upstream.Requests()))
	// Output:
	// call stopped: success - attempts: 1
	// 200
	// call stopped: rate limit spent - attempts: 0
	// refused locally: true
	// api.github.com:443 requests left: 0 refused: 1 sent: 1
}
