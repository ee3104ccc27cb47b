package redisbench

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// GCRA lease. KEYS[1] = ns:quota:<key> (theoretical arrival time, µs, server clock)
// ARGV[1] = emission interval T in µs (1/rate), ARGV[2] = burst b, ARGV[3] = n wanted.
// Returns {granted, wait_us}: wait_us is how long until the next token is free.
// Uses the server's TIME only. Redis 7 always replicates scripts by effects, so the
// SET below (with a computed value) is what replicas/AOF see: TIME is safe here.
const GCRAScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local T = tonumber(ARGV[1])
local tau = T * tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0)
if tat < now then tat = now end
local k = math.floor((tau - (tat - now)) / T)
if k > n then k = n end
if k < 0 then k = 0 end
if k > 0 then
  tat = tat + k * T
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
end
local wait = tat + T - now - tau
if wait < 0 then wait = 0 end
return {k, wait}
`

// Cool-down. KEYS[1] = ns:hold:<key>; ARGV[1] = unix-ms until; ARGV[2] = ttl ms;
// ARGV[3] = channel; ARGV[4] = message. Sets only if later, publishes only on change.
const HoldScript = `
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) <= cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`

const NS = "ns"

var Channel = NS + ":events"

// Fleet is the set of Redis operations the fleet module needs.
type Fleet interface {
	Name() string
	// Lease takes up to n tokens of quota key (1 round trip).
	Lease(ctx context.Context, key string, n int) (granted int64, wait time.Duration, err error)
	// Hold extends the cool-down of key to untilMs (Lua SET-if-later + PUBLISH, 1 RT).
	Hold(ctx context.Context, key string, untilMs int64) (changed bool, err error)
	// BreakerFail increments the windowed failure counter (INCR + PEXPIRE NX, pipelined, 1 RT).
	BreakerFail(ctx context.Context, key string, window time.Duration) (int64, error)
	// BreakerTrial claims the half-open trial (SET NX PX, 1 RT).
	BreakerTrial(ctx context.Context, key, owner string, ttl time.Duration) (bool, error)
	// BreakerOpen records open until untilMs (SET PX + PUBLISH, pipelined, 1 RT).
	BreakerOpen(ctx context.Context, key string, untilMs int64, ttl time.Duration) error
	// Ping is a plain round trip.
	Ping(ctx context.Context) error
	// GetHold reads ns:hold:<key> from Redis (used for resync and CSC).
	GetHold(ctx context.Context, key string) (int64, error)
	// Subscribe runs the fleet subscription until ctx ends; onMsg gets every
	// message, onSub is called on every (re)subscription confirmation.
	Subscribe(ctx context.Context, onMsg func(string), onSub func()) error
	Close()
}

// HoldKey etc. build the key names.
func HoldKey(k string) string  { return NS + ":hold:" + k }
func QuotaKey(k string) string { return NS + ":quota:" + k }
func FailKey(k string) string  { return NS + ":fail:" + k }
func TrialKey(k string) string { return NS + ":trial:" + k }
func OpenKey(k string) string  { return NS + ":open:" + k }

func HoldMsg(key string, untilMs int64) string {
	return "hold " + key + " " + strconv.FormatInt(untilMs, 10)
}

// LocalView is the zero-round-trip read side: a map of key -> until (unix ms)
// fed by pub/sub messages and by a resync after every (re)subscription.
type LocalView struct {
	mu    sync.RWMutex
	until map[string]int64
	Msgs  atomic.Int64
	Subs  atomic.Int64
}

func NewLocalView() *LocalView { return &LocalView{until: map[string]int64{}} }

// OnMessage applies "hold <key> <ms>" / "open <key> <ms>".
func (v *LocalView) OnMessage(m string) {
	v.Msgs.Add(1)
	f := strings.Fields(m)
	if len(f) != 3 {
		return
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return
	}
	v.Set(f[0]+" "+f[1], ms)
}

func (v *LocalView) Set(k string, ms int64) {
	v.mu.Lock()
	if ms > v.until[k] {
		v.until[k] = ms
	}
	v.mu.Unlock()
}

// Replace overwrites (resync: Redis is the source of truth, even if it is older).
func (v *LocalView) Replace(k string, ms int64) {
	v.mu.Lock()
	v.until[k] = ms
	v.mu.Unlock()
}

// Until returns the hold for "hold <key>" (0 if none); no I/O.
func (v *LocalView) Until(k string) int64 {
	v.mu.RLock()
	ms := v.until[k]
	v.mu.RUnlock()
	return ms
}

func (v *LocalView) Keys() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	ks := make([]string, 0, len(v.until))
	for k := range v.until {
		ks = append(ks, k)
	}
	return ks
}
