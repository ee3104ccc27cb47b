package httpretry

import "context"

// overridesKey is the context key of the per-request policy edits.
type overridesKey struct{}

// overrides is the list of edits a context carries, oldest first.
type overrides []func(*Policy)

// WithPolicy returns a copy of ctx whose requests, sent through a
// Transport, use the policy that would apply to them (after the Hosts
// lookup) as edited by f. f receives a copy of that policy with
// MaxAttempts, Backoff, MaxRetryAfter, MaxReplayBytes and NewBudget filled
// in with the values that apply, and edits it in place; a field it sets to
// zero then means the package default. Several calls compose in order: the
// function of the innermost context runs last. A nil f adds nothing.
//
// Because it travels in the request's context, WithPolicy reaches through
// any SDK that takes a context.Context. Per-host state stays per host: a
// call cannot change NewBudget, Breaker or Overload, and its retries are
// charged to the host's budget like any other. An edit that makes the policy invalid,
// or changes a per-host setting, fails the request with ErrInvalidPolicy.
func WithPolicy(ctx context.Context, f func(p *Policy)) context.Context {
	if f == nil {
		return ctx
	}
	prev, _ := ctx.Value(overridesKey{}).(overrides)
	next := make(overrides, len(prev), len(prev)+1)
	copy(next, prev)
	return context.WithValue(ctx, overridesKey{}, append(next, f))
}

// WithoutRetries returns a copy of ctx whose requests, sent through a
// Transport, get exactly one attempt: no retry and no hedge. Everything
// else about the policy (idempotency keys, the breaker, logging) still
// applies. It composes with WithPolicy like any other edit.
func WithoutRetries(ctx context.Context) context.Context {
	return WithPolicy(ctx, withoutRetries)
}

func withoutRetries(p *Policy) {
	p.MaxAttempts = 1
	p.Hedge = HedgePolicy{}
}

func overridesFrom(ctx context.Context) overrides {
	o, _ := ctx.Value(overridesKey{}).(overrides)
	return o
}

// override returns p as edited by fs, compiled for one request.
func (p *policy) override(fs overrides) (*policy, error) {
	base := p.src.resolved()
	edited := base
	for _, f := range fs {
		f(&edited)
	}
	resolved := edited.resolved() // a per-host field set to zero means its default, as at the host
	if field := resolved.changedPerHost(&base); field != "" {
		return nil, invalidf("WithPolicy."+field, "is per host and cannot be changed per request")
	}
	errs := edited.check("WithPolicy")
	if err := edited.checkMerged("WithPolicy"); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, joinUnique(errs)
	}
	return compile(edited), nil
}
