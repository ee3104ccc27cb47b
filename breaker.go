package httpretry

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/sony/gobreaker/v2"
)

// breaker is the circuit breaker of one host.
type breaker = gobreaker.TwoStepCircuitBreaker[struct{}]

// Outcomes reported to gobreaker. They never leave this package.
var (
	errBreakerFailure  = errors.New("httpretry: attempt failed")
	errBreakerExcluded = errors.New("httpretry: attempt not counted")
)

// breaker returns the circuit breaker of u's host under p, creating it on
// first use, or nil when p has none.
func (t *Transport) breaker(p *policy, u *url.URL) *breaker {
	if p.breaker == nil {
		return nil
	}
	key := hostKey(u)
	if b, ok := t.breakers.Load(key); ok {
		return b.(*breaker)
	}
	st := *p.breaker
	if st.Name == "" {
		st.Name = key
	}
	userExcluded := st.IsExcluded
	st.IsExcluded = func(err error) bool {
		return err == errBreakerExcluded || (userExcluded != nil && userExcluded(err))
	}
	st.IsSuccessful = nil // outcomes are classified by the Transport: nil is a success
	b, _ := t.breakers.LoadOrStore(key, gobreaker.NewTwoStepCircuitBreaker[struct{}](st))
	return b.(*breaker)
}

// admit asks the breaker whether attempt may be sent. It returns the
// callback that reports the attempt's outcome, or an error wrapping
// ErrCircuitOpen when the breaker refuses.
func admit(b *breaker) (func(error), error) {
	if b == nil {
		return nil, nil
	}
	done, err := b.Allow()
	switch {
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		return nil, fmt.Errorf("%w for %s (half-open, trial requests in flight)", ErrCircuitOpen, b.Name())
	case err != nil:
		return nil, fmt.Errorf("%w for %s", ErrCircuitOpen, b.Name())
	}
	return done, nil
}

// breakerOutcome maps a classified attempt to what the breaker counts:
// transient and not-processed failures, and fatal errors without a response
// (a certificate the host should not present), are failures; any response
// the server meant to send, 4xx included, is a success; the caller's own
// cancellation and a breaker refusal further down are not counted.
func breakerOutcome(ctx context.Context, o *outcome) error {
	switch {
	case ctx.Err() != nil || isBreakerOpen(o.err) || errors.Is(o.err, ErrHedgeLost):
		return errBreakerExcluded
	case o.class.retryable() || (o.err != nil && o.class == ClassFatal):
		return errBreakerFailure
	}
	return nil
}

// isBreakerOpen reports whether err is a refusal by a circuit breaker: ours,
// or a gobreaker used by a layer under the Transport.
func isBreakerOpen(err error) bool {
	return errors.Is(err, ErrCircuitOpen) || errors.Is(err, gobreaker.ErrOpenState) ||
		errors.Is(err, gobreaker.ErrTooManyRequests)
}
