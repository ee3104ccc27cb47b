package sim

import (
	"time"

	"github.com/seedhq/httpretry/internal/budget"
)

// Budget is a retry budget driven on a simulation's virtual clock. The
// methods of httpretry.Budget read the real clock, so the simulations call
// the engines of httpretry's budgets (package internal/budget, which
// httpretry.TokenBucket and httpretry.RatioBudget wrap) through their
// explicit-time forms instead, as golang.org/x/time/rate's AllowN does: the
// same code, on simulated time.
type Budget interface {
	BeginAt(now time.Time)
	AllowRetryAt(now time.Time, timeout bool) bool
	SucceededAt(now time.Time, retried, timeout bool)
}

// DefaultBudget is httpretry's default budget, a TokenBucket with the AWS
// SDKs' numbers. The bucket ignores time.
func DefaultBudget() Budget {
	b := new(budget.TokenBucket)
	b.Init(0, 0, 0, 0)
	return tokenBucket{b}
}

// RatioBudget is httpretry's RatioBudget with its defaults: 10 % over a
// 10 s window, a floor of one retry per second.
func RatioBudget() Budget {
	b := new(budget.Ratio)
	b.Init(0, 0, 0)
	return ratioBudget{b}
}

type tokenBucket struct{ *budget.TokenBucket }

func (b tokenBucket) BeginAt(time.Time)                           { b.Begin() }
func (b tokenBucket) AllowRetryAt(_ time.Time, timeout bool) bool { return b.AllowRetry(timeout) }
func (b tokenBucket) SucceededAt(_ time.Time, retried, timeout bool) {
	b.Succeeded(retried, timeout)
}

type ratioBudget struct{ *budget.Ratio }

func (b ratioBudget) SucceededAt(time.Time, bool, bool) {}
