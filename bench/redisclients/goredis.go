package redisbench

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	grGCRA = redis.NewScript(GCRAScript)
	grHold = redis.NewScript(HoldScript)
)

// GoRedis implements Fleet on github.com/redis/go-redis/v9.
type GoRedis struct {
	name string
	C    *redis.Client
	cmd  redis.Cmdable // C itself, or its AutoPipeliner
}

// GoRedisFleetOptions are the options we recommend: every wait bounded,
// no internal retry (the caller's deadline is the budget), context honoured.
func GoRedisFleetOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		Protocol:              3,
		ContextTimeoutEnabled: true,                   // socket deadlines follow ctx
		MaxRetries:            -1,                     // never re-send (leases are not idempotent)
		DialTimeout:           250 * time.Millisecond, // dials run in the background; ctx bounds the caller
		DialerRetries:         1,
		ReadTimeout:           100 * time.Millisecond, // backstop for calls without a deadline
		WriteTimeout:          100 * time.Millisecond,
		PoolTimeout:           5 * time.Millisecond, // pool wait also honours ctx
		PoolSize:              32,
		MinIdleConns:          4,
		DisableIdentity:       true, // no CLIENT SETINFO round trips on connect
	}
}

// GoRedisTightOptions sets every timeout to the 5 ms call bound (shown to be a
// mistake: dial failures under load trip the pool's dial breaker for ~1 s).
func GoRedisTightOptions(addr string) *redis.Options {
	o := GoRedisFleetOptions(addr)
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = 5*time.Millisecond, 5*time.Millisecond, 5*time.Millisecond, 5*time.Millisecond
	return o
}

// NewGoRedis builds a client; auto selects the blocking AutoPipeliner face.
func NewGoRedis(name string, opt *redis.Options, auto bool) (*GoRedis, error) {
	c := redis.NewClient(opt)
	g := &GoRedis{name: name, C: c, cmd: c}
	if auto {
		ap, err := c.AutoPipeline()
		if err != nil {
			return nil, err
		}
		g.cmd = ap
	}
	return g, nil
}

func (g *GoRedis) Name() string { return g.name }
func (g *GoRedis) Close()       { g.C.Close() }

func (g *GoRedis) Ping(ctx context.Context) error { return g.cmd.Ping(ctx).Err() }

func (g *GoRedis) Lease(ctx context.Context, key string, n int) (int64, time.Duration, error) {
	// 100 tokens/s (T = 10ms), burst 50.
	v, err := grGCRA.Run(ctx, g.cmd, []string{QuotaKey(key)}, 10000, 50, n).Int64Slice()
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 2 {
		return 0, 0, errors.New("gcra: bad reply")
	}
	return v[0], time.Duration(v[1]) * time.Microsecond, nil
}

func (g *GoRedis) Hold(ctx context.Context, key string, untilMs int64) (bool, error) {
	ttl := untilMs - time.Now().UnixMilli()
	if ttl < 1 {
		ttl = 1
	}
	r, err := grHold.Run(ctx, g.cmd, []string{HoldKey(key)}, untilMs, ttl, Channel, HoldMsg(key, untilMs)).Int64()
	return r == 1, err
}

func (g *GoRedis) BreakerFail(ctx context.Context, key string, window time.Duration) (int64, error) {
	var incr *redis.IntCmd
	_, err := g.cmd.Pipelined(ctx, func(p redis.Pipeliner) error {
		incr = p.Incr(ctx, FailKey(key))
		p.Do(ctx, "pexpire", FailKey(key), window.Milliseconds(), "nx") // no typed PExpireNX
		return nil
	})
	if err != nil {
		return 0, err
	}
	return incr.Val(), nil
}

func (g *GoRedis) BreakerTrial(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	err := g.cmd.SetArgs(ctx, TrialKey(key), owner, redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
	if err == redis.Nil {
		return false, nil
	}
	return err == nil, err
}

func (g *GoRedis) BreakerOpen(ctx context.Context, key string, untilMs int64, ttl time.Duration) error {
	_, err := g.cmd.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, OpenKey(key), untilMs, ttl)
		p.Publish(ctx, Channel, "open "+key+" "+strconv.FormatInt(untilMs, 10))
		return nil
	})
	return err
}

func (g *GoRedis) GetHold(ctx context.Context, key string) (int64, error) {
	v, err := g.cmd.Get(ctx, HoldKey(key)).Int64()
	if err == redis.Nil {
		return 0, nil
	}
	return v, err
}

// Subscribe uses ChannelWithSubscriptions so that a resubscription after a
// reconnect is visible (Channel() swallows *Subscription).
func (g *GoRedis) Subscribe(ctx context.Context, onMsg func(string), onSub func()) error {
	ps := g.C.Subscribe(ctx, Channel)
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(time.Second), redis.WithChannelSize(1024))
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-ch:
			if !ok {
				return errors.New("closed")
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" && onSub != nil {
					onSub()
				}
			case *redis.Message:
				onMsg(m.Payload)
			}
		}
	}
}

// ScanHolds returns every ns:hold:* key with its value (resync after resubscribe).
func (g *GoRedis) ScanHolds(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	it := g.C.Scan(ctx, 0, NS+":hold:*", 1000).Iterator()
	var keys []string
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return out, nil
	}
	vals, err := g.C.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		if s, ok := vals[i].(string); ok {
			v, _ := strconv.ParseInt(s, 10, 64)
			out[k[len(NS+":hold:"):]] = v
		}
	}
	return out, nil
}
