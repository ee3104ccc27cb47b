package httpretry

import (
	"time"

	"github.com/seedhq/httpretry/internal/budget"
)

// A Budget limits the retries sent to one host, so that a dependency's
// outage is not multiplied into a retry storm. Retries are selfish: when
// failures come from overload, every retry adds load exactly when the
// dependency can least take it. A budget lets retries through while failures
// are rare and stops them when failures are sustained.
//
// The Transport keeps one Budget per host, created by Policy.NewBudget when
// the host first needs per-host state (at its first failure), and calls it
// from many goroutines at once. Implementations must not block. A nil
// Budget allows every retry.
//
// A Budget that also has a method Level() (available, capacity float64)
// reports it in Transport.Stats, as NewTokenBucket's and NewRatioBudget's
// do; one that also has a String method has it logged with each attempt.
type Budget interface {
	// Begin records that a request to the host starts.
	Begin()

	// AllowRetry reports whether a retry may be sent and, when it may,
	// takes its cost. timeout marks a retry after an attempt timeout, which
	// some budgets charge more.
	AllowRetry(timeout bool) bool

	// Refund gives back the cost of a retry that AllowRetry allowed but
	// that was never sent: the caller's context ended during the wait, the
	// breaker opened, PrepareRetry refused it. Only retries actually sent
	// cost anything.
	Refund(timeout bool)

	// Succeeded records that a request ended in success. retried reports
	// whether it took at least one retry, and timeout whether the last
	// retry was charged as a timeout retry.
	Succeeded(retried, timeout bool)
}

// DefaultBudget returns the budget a Policy uses when NewBudget is nil: a
// token bucket with the AWS SDKs' retry-quota numbers (see NewTokenBucket). It
// ignores host.
func DefaultBudget(host string) Budget { return defaultBudget() }

// NoBudget, as Policy.NewBudget, turns retry budgeting off: it returns a
// budget that allows every retry the rest of the policy allows, which is
// what go-retryablehttp and failsafe-go do by default. The Transport then
// keeps no budget, so a host without a breaker, hedging or an overload
// control keeps no state at all.
func NoBudget(host string) Budget { return unlimited{} }

// unlimited is NoBudget's: the Transport keeps no budget for it.
type unlimited struct{}

func (unlimited) Begin()               {}
func (unlimited) AllowRetry(bool) bool { return true }
func (unlimited) Refund(bool)          {}
func (unlimited) Succeeded(bool, bool) {}
func (unlimited) String() string       { return "unlimited" }

// TokenBucketConfig configures NewTokenBucket. Zero fields take the AWS
// SDK retry-quota defaults; negative fields are treated as zero.
type TokenBucketConfig struct {
	Capacity      int // tokens when full, and at the start; 0 means 500
	RetryCost     int // tokens a retry takes; 0 means 5
	TimeoutCost   int // tokens a retry after an attempt timeout takes; 0 means 10
	SuccessCredit int // tokens a success without retries returns; 0 means 1
}

// NewTokenBucket returns a full success-funded retry budget, the retry
// quota of the AWS SDKs. A retry takes RetryCost tokens (TimeoutCost after
// a timeout) and is refused when the bucket holds fewer; a request that
// succeeds without retrying returns SuccessCredit tokens, and one that
// succeeds after retrying gets its last retry's cost back.
//
// With the defaults, a fresh bucket allows 100 retries during a total
// outage and then none until successes refill it: attempts per request tend
// to 1 (1.033 over 300 s at 10 requests per second, in the bench module's
// storm simulation). Because a retry that succeeds gets its cost back, with
// 4 attempts the bucket only drains once about 30 % of attempts fail
// independently; below that it is never seen. It ignores time. It is safe
// for concurrent use and never blocks; the success path is one atomic load
// when the bucket is full. It reports its level (see Budget) as the tokens
// it holds and its capacity.
func NewTokenBucket(c TokenBucketConfig) Budget {
	t := new(budget.TokenBucket)
	t.Init(c.Capacity, c.RetryCost, c.TimeoutCost, c.SuccessCredit)
	return t
}

// RatioConfig configures NewRatioBudget. Zero fields take the defaults.
type RatioConfig struct {
	// Ratio is the largest share of retries among requests in the window;
	// 0 means 0.1, the SRE book's per-client budget.
	Ratio float64
	// Window is the sliding window the ratio is measured over, with a
	// resolution of one tenth of it; 0 means 10 s.
	Window time.Duration
	// MinPerSecond is a floor of retries per second always allowed, so that
	// a host with little traffic can still retry, counted over the window
	// (1 per second over 10 s allows 10 at once from a quiet start); 0 means
	// 1. A negative value means no floor.
	MinPerSecond float64
}

// NewRatioBudget returns an empty ratio budget: it allows a retry while
// retries in the sliding window stay below Ratio × requests in it, or below
// the MinPerSecond floor. Under sustained total failure, attempts per
// request settle at about 1 + Ratio. The window has a resolution of a tenth
// of its length; the oldest tenth fades out as the newest fills, so the
// allowance is released smoothly. It is safe for concurrent use and
// lock-free; counts at a slot boundary are approximate by a few requests.
// It reports its level (see Budget) as the retries the window still allows
// and the window's allowance. Nonsense values (NaN, negative ratio or
// window) are treated as zero, which selects the default.
func NewRatioBudget(c RatioConfig) Budget {
	r := new(budget.Ratio)
	r.Init(c.Ratio, c.Window, c.MinPerSecond)
	return r
}

// leveler is the optional method a Budget reports its level with.
type leveler interface {
	Level() (available, capacity float64)
}
