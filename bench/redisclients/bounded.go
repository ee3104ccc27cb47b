package redisbench

import (
	"context"
	"time"
)

// Bounded makes every call return by the caller's deadline no matter what the
// client does inside (reconnect handshakes, graceful closes, huge replies): the
// call runs in its own goroutine and is abandoned at ctx.Done(). Cost: one
// goroutine + one small channel per call; abandoned calls finish in the
// background (bounded by the client's own timeouts).
type Bounded struct{ Fleet }

type res[T any] struct {
	v   T
	err error
}

func bound[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	ch := make(chan res[T], 1)
	go func() { v, err := f(); ch <- res[T]{v, err} }()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var z T
		return z, ctx.Err()
	}
}

type lease struct {
	g int64
	w time.Duration
}

func (b Bounded) Lease(ctx context.Context, key string, n int) (int64, time.Duration, error) {
	r, err := bound(ctx, func() (lease, error) { g, w, err := b.Fleet.Lease(ctx, key, n); return lease{g, w}, err })
	return r.g, r.w, err
}
func (b Bounded) Hold(ctx context.Context, key string, untilMs int64) (bool, error) {
	return bound(ctx, func() (bool, error) { return b.Fleet.Hold(ctx, key, untilMs) })
}
func (b Bounded) BreakerFail(ctx context.Context, key string, w time.Duration) (int64, error) {
	return bound(ctx, func() (int64, error) { return b.Fleet.BreakerFail(ctx, key, w) })
}
func (b Bounded) BreakerTrial(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return bound(ctx, func() (bool, error) { return b.Fleet.BreakerTrial(ctx, key, owner, ttl) })
}
func (b Bounded) BreakerOpen(ctx context.Context, key string, u int64, ttl time.Duration) error {
	_, err := bound(ctx, func() (struct{}, error) { return struct{}{}, b.Fleet.BreakerOpen(ctx, key, u, ttl) })
	return err
}
func (b Bounded) Ping(ctx context.Context) error {
	_, err := bound(ctx, func() (struct{}, error) { return struct{}{}, b.Fleet.Ping(ctx) })
	return err
}
func (b Bounded) GetHold(ctx context.Context, key string) (int64, error) {
	return bound(ctx, func() (int64, error) { return b.Fleet.GetHold(ctx, key) })
}
