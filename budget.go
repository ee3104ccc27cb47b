package httpretry

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
// reports it in Transport.Stats, as TokenBucket and RatioBudget do.
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
// token bucket with the AWS SDKs' retry-quota numbers (see TokenBucket). It
// ignores host.
func DefaultBudget(host string) Budget { return NewTokenBucket(TokenBucketConfig{}) }

// NoBudget, as Policy.NewBudget, turns retry budgeting off: it returns a
// budget that allows every retry the rest of the policy allows, which is
// what go-retryablehttp and failsafe-go do by default. Such a budget keeps
// no state, so a host without a breaker keeps none either.
func NoBudget(host string) Budget { return unlimited{} }

// unlimited allows everything. The Transport recognises it and keeps no
// budget at all.
type unlimited struct{}

func (unlimited) Begin()               {}
func (unlimited) AllowRetry(bool) bool { return true }
func (unlimited) Refund(bool)          {}
func (unlimited) Succeeded(bool, bool) {}
func (unlimited) String() string       { return "unlimited" }

// newBudget creates the budget of host under p, nil when p has none.
func (p *policy) budgetFor(host string) Budget {
	if p.newBudget == nil {
		return nil
	}
	b := p.newBudget(host)
	if _, ok := b.(unlimited); ok {
		return nil
	}
	return b
}

// leveler is the optional method a Budget reports its level with.
type leveler interface {
	Level() (available, capacity float64)
}
