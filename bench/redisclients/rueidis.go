package redisbench

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

var (
	rdGCRA = rueidis.NewLuaScript(GCRAScript) // not Retryable: a lease is not idempotent
	rdHold = rueidis.NewLuaScript(HoldScript)
)

// Rueidis implements Fleet on github.com/redis/rueidis.
type Rueidis struct {
	name string
	C    rueidis.Client
}

// RueidisFleetOptions are the options we recommend: bounded dial, bounded
// connection liveness, no internal retry, auto-pipelining on (default).
func RueidisFleetOptions(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       []string{addr},
		ForceSingleClient: true,
		// Dial + HELLO handshake bound (the caller's ctx bounds it further).
		Dialer: net.Dialer{Timeout: 250 * time.Millisecond, KeepAlive: time.Second},
		// Liveness: a connection with no reply for this long is closed.
		ConnWriteTimeout: time.Second,
		DisableRetry:     true, // never re-send; the caller's deadline is the budget
		ClientSetInfo:    rueidis.DisableClientSetInfo,
	}
}

func NewRueidis(name string, opt rueidis.ClientOption) (*Rueidis, error) {
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	return &Rueidis{name: name, C: c}, nil
}

func (r *Rueidis) Name() string { return r.name }
func (r *Rueidis) Close()       { r.C.Close() }

func (r *Rueidis) Ping(ctx context.Context) error {
	return r.C.Do(ctx, r.C.B().Ping().Build()).Error()
}

func (r *Rueidis) Lease(ctx context.Context, key string, n int) (int64, time.Duration, error) {
	v, err := rdGCRA.Exec(ctx, r.C, []string{QuotaKey(key)}, []string{"10000", "50", strconv.Itoa(n)}).AsIntSlice()
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 2 {
		return 0, 0, errors.New("gcra: bad reply")
	}
	return v[0], time.Duration(v[1]) * time.Microsecond, nil
}

func (r *Rueidis) Hold(ctx context.Context, key string, untilMs int64) (bool, error) {
	ttl := untilMs - time.Now().UnixMilli()
	if ttl < 1 {
		ttl = 1
	}
	v, err := rdHold.Exec(ctx, r.C, []string{HoldKey(key)},
		[]string{strconv.FormatInt(untilMs, 10), strconv.FormatInt(ttl, 10), Channel, HoldMsg(key, untilMs)}).AsInt64()
	return v == 1, err
}

func (r *Rueidis) BreakerFail(ctx context.Context, key string, window time.Duration) (int64, error) {
	res := r.C.DoMulti(ctx,
		r.C.B().Incr().Key(FailKey(key)).Build(),
		r.C.B().Pexpire().Key(FailKey(key)).Milliseconds(window.Milliseconds()).Nx().Build())
	if err := res[1].Error(); err != nil {
		return 0, err
	}
	return res[0].AsInt64()
}

func (r *Rueidis) BreakerTrial(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	err := r.C.Do(ctx, r.C.B().Set().Key(TrialKey(key)).Value(owner).Nx().PxMilliseconds(ttl.Milliseconds()).Build()).Error()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	return err == nil, err
}

func (r *Rueidis) BreakerOpen(ctx context.Context, key string, untilMs int64, ttl time.Duration) error {
	u := strconv.FormatInt(untilMs, 10)
	res := r.C.DoMulti(ctx,
		r.C.B().Set().Key(OpenKey(key)).Value(u).PxMilliseconds(ttl.Milliseconds()).Build(),
		r.C.B().Publish().Channel(Channel).Message("open "+key+" "+u).Build())
	for _, x := range res {
		if err := x.Error(); err != nil {
			return err
		}
	}
	return nil
}

func (r *Rueidis) GetHold(ctx context.Context, key string) (int64, error) {
	v, err := r.C.Do(ctx, r.C.B().Get().Key(HoldKey(key)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	return v, err
}

// GetHoldCached reads through rueidis server-assisted client-side caching
// (RESP3 CLIENT TRACKING): a hit costs no round trip; an invalidation push
// evicts the entry; ttl bounds staleness if the push is lost.
func (r *Rueidis) GetHoldCached(ctx context.Context, key string, ttl time.Duration) (int64, bool, error) {
	res := r.C.DoCache(ctx, r.C.B().Get().Key(HoldKey(key)).Cache(), ttl)
	v, err := res.AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, res.IsCacheHit(), nil
	}
	return v, res.IsCacheHit(), err
}

func (r *Rueidis) Subscribe(ctx context.Context, onMsg func(string), onSub func()) error {
	for ctx.Err() == nil {
		hctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" && onSub != nil {
				onSub()
			}
		})
		err := r.C.Receive(hctx, r.C.B().Subscribe().Channel(Channel).Build(), func(m rueidis.PubSubMessage) {
			onMsg(m.Message)
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_ = err // connection broken (DisableRetry): resubscribe after a short pause
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return ctx.Err()
}

// ScanHolds returns every ns:hold:* key with its value (resync after resubscribe).
func (r *Rueidis) ScanHolds(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	var keys []string
	var cursor uint64
	for {
		e, err := r.C.Do(ctx, r.C.B().Scan().Cursor(cursor).Match(NS+":hold:*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			return nil, err
		}
		keys = append(keys, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	vals, err := r.C.Do(ctx, r.C.B().Mget().Key(keys...).Build()).ToArray()
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		if v, err := vals[i].AsInt64(); err == nil {
			out[k[len(NS+":hold:"):]] = v
		}
	}
	return out, nil
}
