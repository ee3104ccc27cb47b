package httpretry_test

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/seedhq/httpretry"
)

// coverage counts what the scenarios exercised, so that the summary shows
// the checks had something to check.
var coverage struct {
	calls, attempts, retries, hedges, lost, timedOut    atomic.Int64
	responses, held, errors, cancelled, unsafeRetries   atomic.Int64
	budgetLevels, breakerOpen, bodiesRead, serverDelays atomic.Int64
}

func (r *run) cover(recs []*baseRec, attempts []httpretry.Attempt, c *callRun) {
	coverage.calls.Add(1)
	coverage.attempts.Add(int64(len(recs)))
	for _, b := range recs {
		if b.timedOut() {
			coverage.timedOut.Add(1)
		}
	}
	for _, a := range attempts {
		switch {
		case a.Hedge:
			coverage.hedges.Add(1)
		case a.N > 1:
			coverage.retries.Add(1)
		}
		if a.Lost {
			coverage.lost.Add(1)
		}
		if a.Retry && a.DelaySource != httpretry.DelayBackoff {
			coverage.serverDelays.Add(1)
		}
	}
	if c.resp != nil {
		coverage.responses.Add(1)
		if len(attempts) > 0 && attempts[len(attempts)-1].Retry {
			coverage.held.Add(1)
		}
		if len(c.read) > 0 {
			coverage.bodiesRead.Add(1)
		}
	} else {
		coverage.errors.Add(1)
	}
	if !c.cancelled().IsZero() {
		coverage.cancelled.Add(1)
	}
	if !idempotent(c.spec.method) && len(recs) > 1 && !r.effective(c.spec).keyed(recs[0].header) {
		coverage.unsafeRetries.Add(1)
	}
}

// coverageString formats the counts.
func coverageString() string {
	v := &coverage
	parts := []string{
		fmt.Sprintf("%d calls", v.calls.Load()),
		fmt.Sprintf("%d attempts", v.attempts.Load()),
		fmt.Sprintf("%d retries", v.retries.Load()),
		fmt.Sprintf("%d hedges (%d lost)", v.hedges.Load(), v.lost.Load()),
		fmt.Sprintf("%d attempts timed out", v.timedOut.Load()),
		fmt.Sprintf("%d server-set waits", v.serverDelays.Load()),
		fmt.Sprintf("%d responses (%d held through a refused retry, %d bodies read)", v.responses.Load(), v.held.Load(), v.bodiesRead.Load()),
		fmt.Sprintf("%d errors", v.errors.Load()),
		fmt.Sprintf("%d cancelled by the caller", v.cancelled.Load()),
		fmt.Sprintf("%d unkeyed unsafe calls sent again (not processed)", v.unsafeRetries.Load()),
		fmt.Sprintf("%d budget levels checked exactly", v.budgetLevels.Load()),
		fmt.Sprintf("%d breaker openings modelled", v.breakerOpen.Load()),
	}
	return strings.Join(parts, ", ")
}
