// Package fleet shares, through Redis, what the processes of a fleet
// learn about the hosts they call: a cool-down one process was told, a
// quota the policy declares, and a breaker one process opened or the
// fleet's failures together opened. It implements httpretry.Fleet:
//
//	f, err := fleet.New(client, fleet.Options{})
//	...
//	defer f.Close()
//	t := &httpretry.Transport{Fleet: f, Policy: ...}
//
// client is a rueidis.Client the program builds, with its own address,
// TLS and AUTH (ClientOption gives the options this package recommends).
//
// No call fails and no call waits longer than Options.Timeout because of
// Redis: every command a call waits for is bounded by it, and when Redis
// is down, slow, restarted empty or answers what it should not, the Fleet
// answers as one that knows nothing, so each process goes on with its own
// pacing and breakers, and it rejoins once Redis answers again. Each such
// change is logged once and counted in Stats.
//
// Redis holds host keys ("host:port" or a Quota.Key), times and counts,
// nothing else, under keys that all expire. See docs/fleet.md in the
// repository for the design and the figures.
package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/seedhq/httpretry"
)

// Options configure a Fleet. The zero value is ready to use.
type Options struct {
	// Namespace prefixes every Redis key and the channel of the Fleet;
	// the processes of one fleet use the same. "" means "httpretry".
	Namespace string

	// Timeout bounds every Redis command a call waits for: reporting
	// for a share of a quota, counting a failure, holding a host. A command
	// that takes longer is left (Stats.Slow), and three in a row count as
	// Redis being down. 0 means 10 ms, many
	// round trips on loopback or within one zone; a negative value is
	// refused by New.
	Timeout time.Duration

	// LeaseFor is how long a process's share of a quota lasts: every
	// LeaseFor, a process that calls the quota's host reports the rate
	// it wants and takes its share of the quota's rate back, so that the
	// steady state costs a round trip a LeaseFor, not one a call, and a
	// change of demand is followed within a LeaseFor. 0 means a second;
	// a negative value is refused by New.
	LeaseFor time.Duration

	// Logger receives one line each time Redis becomes unreachable and
	// each time it is back. nil means slog.Default().
	Logger *slog.Logger
}

// Stats are a Fleet's counts since New.
type Stats struct {
	// Up reports that Redis answers and the Fleet's subscription is
	// live: the processes share state. While it is false each process
	// keeps its own.
	Up bool `json:"up"`
	// Downs counts the times Redis became unreachable, slow or wrong
	// and the Fleet fell back to each process's own state.
	Downs int64 `json:"downs"`
	// Slow counts the commands that missed Options.Timeout: the call
	// that waited went on by its process's own state. Three in a row
	// count as Redis being down.
	Slow int64 `json:"slow"`
	// Commands counts the Redis commands the Fleet sent (scripts
	// included).
	Commands int64 `json:"commands"`
	// Leases counts the reports that took a share of a quota.
	Leases int64 `json:"leases"`
	// Invalid counts the replies and messages that were refused as
	// malformed or out of bounds.
	Invalid int64 `json:"invalid"`
	// Messages counts the messages received from the other processes.
	Messages int64 `json:"messages"`
}

// Fleet is an httpretry.Fleet on Redis. It is safe for concurrent use;
// New makes one, Close ends it.
type Fleet struct {
	c        rueidis.Client
	timeout  time.Duration
	leaseFor time.Duration
	log      *slog.Logger
	id       string // this process's name in the trials it holds

	cool, open, channel string // the keys of the sets and the channel
	prefix              string // ns + ":"

	mu    sync.RWMutex
	keys  map[string]*entry
	swept time.Time // when the keys at rest were last forgotten (sweep)

	up         atomic.Bool
	synced     chan struct{} // closed after the first sync
	probing    atomic.Bool
	subscribed atomic.Bool // the subscription is live: no message is missed
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	life       sync.Mutex // guards closed, and wg.Go against Close's Wait
	closed     bool

	downs, commands, leases, invalid, messages atomic.Int64
	slow, slowInARow                           atomic.Int64
	warned                                     atomic.Int64 // when down last logged a warning, Unix ns
}

var _ httpretry.Fleet = (*Fleet)(nil)

// maxKeys bounds the host keys a Fleet keeps, as the Transport bounds its
// hosts: past it, the keys at rest are forgotten to make room, and while
// none is, a new key is not shared.
const maxKeys = 10000

// maxHold bounds a time read from Redis or from another process: a
// cool-down or an open breaker longer than an hour is refused as invalid.
const maxHold = time.Hour

// New returns a Fleet on client, subscribed to its namespace's channel,
// after its first sync with Redis or, when Redis does not answer within
// a second, at once, falling back to the process's own state until it
// does. The client stays the caller's: Close does not close it.
func New(client rueidis.Client, opts Options) (*Fleet, error) {
	switch {
	case client == nil:
		return nil, errors.New("fleet: New needs a rueidis.Client")
	case opts.Timeout < 0:
		return nil, errors.New("fleet: Options.Timeout is negative")
	case opts.LeaseFor < 0:
		return nil, errors.New("fleet: Options.LeaseFor is negative")
	}
	ns := opts.Namespace
	if ns == "" {
		ns = "httpretry"
	}
	f := &Fleet{
		c:        client,
		timeout:  opts.Timeout,
		leaseFor: opts.LeaseFor,
		log:      opts.Logger,
		id:       newID(),
		cool:     ns + ":cool",
		open:     ns + ":open",
		channel:  ns + ":events",
		prefix:   ns + ":",
		keys:     make(map[string]*entry),
		synced:   make(chan struct{}),
	}
	if f.timeout == 0 {
		f.timeout = 10 * time.Millisecond
	}
	if f.leaseFor == 0 {
		f.leaseFor = time.Second
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.wg.Go(f.subscribe)
	select {
	case <-f.synced:
	case <-time.After(time.Second):
		if !f.up.Load() { // it may have come as the second passed
			f.downs.Add(1)
			f.warned.Store(time.Now().UnixNano())
			f.log.Warn("httpretry/fleet: Redis did not answer within a second; each process keeps its own state until it does")
			f.probe()
		}
	}
	return f, nil
}

// Close ends f's subscription and its background work. The Fleet then
// knows nothing: the Transports that use it keep their own state.
func (f *Fleet) Close() error {
	f.life.Lock()
	f.closed = true
	f.life.Unlock()
	f.cancel()
	f.wg.Wait()
	f.up.Store(false)
	return nil
}

// String returns f's Stats as a JSON object, so that a Fleet is an
// expvar.Var: expvar.Publish("httpretry_fleet", f) serves it at
// /debug/vars, and statuspage.Handler shows it above its hosts.
func (f *Fleet) String() string {
	b, err := json.Marshal(f.Stats())
	if err != nil { // Stats is booleans and counts: it always encodes
		return "{}"
	}
	return string(b)
}

// Stats returns f's counts.
func (f *Fleet) Stats() Stats {
	return Stats{
		Up:       f.up.Load(),
		Downs:    f.downs.Load(),
		Slow:     f.slow.Load(),
		Commands: f.commands.Load(),
		Leases:   f.leases.Load(),
		Invalid:  f.invalid.Load(),
		Messages: f.messages.Load(),
	}
}

// ClientOption returns the rueidis options this package recommends for a
// Redis at addr ("host:port"): a single node, a dial bounded at 250 ms,
// no resending of a command (a lease is not idempotent), a connection
// closed after a second without an answer. Set TLSConfig, Username and
// Password on what it returns as the deployment needs.
func ClientOption(addr string) rueidis.ClientOption {
	o := rueidis.ClientOption{
		InitAddress:       []string{addr},
		ForceSingleClient: true,
		DisableRetry:      true,
		ConnWriteTimeout:  time.Second,
		ClientSetInfo:     rueidis.DisableClientSetInfo,
	}
	o.Dialer.Timeout = 250 * time.Millisecond
	o.Dialer.KeepAlive = time.Second
	return o
}

// do runs one command bounded by f's timeout, and reports Redis down when
// it fails or takes longer.
func (f *Fleet) do(cmd func(ctx context.Context) rueidis.RedisResult) (rueidis.RedisResult, bool) {
	f.commands.Add(1)
	res, err := bounded(f.timeout, cmd)
	if err == nil {
		err = res.Error()
	}
	if err != nil && !rueidis.IsRedisNil(err) {
		if errors.Is(err, context.DeadlineExceeded) {
			f.slow.Add(1)
			if f.slowInARow.Add(1) < slowInARow {
				return res, false // this call goes on without it; the view stays
			}
		}
		f.down(err)
		return res, false
	}
	f.slowInARow.Store(0)
	return res, true
}

// slowInARow is how many commands in a row must miss Options.Timeout for
// Redis to count as down. One late answer is a pause (a collection, a
// busy core), not an outage: the call that waited goes on by its own
// process's state and the view is kept; a Redis that stalls is down
// after the third, each bounded by the Timeout.
const slowInARow = 3

// bounded returns what cmd returns, or the context's error once timeout
// passed, whichever comes first. The client does not always return at
// its context's deadline: a command already written to a connection
// that went silent (a network that drops packets, a Redis that stalls)
// waits for the connection's own timeout, a second, and one that is
// answered 50 ms late waits the 50 ms (measured: bench/redisclients).
// So cmd runs on a goroutine of its own, which is left to finish, within
// the client's bound, when the timeout passes first.
func bounded[T any](timeout time.Duration, cmd func(ctx context.Context) T) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan T, 1)
	go func() { done <- cmd(ctx) }()
	select {
	case v := <-done:
		return v, nil
	case <-ctx.Done():
		select {
		case v := <-done: // it came as the time ran out: it counts
			return v, nil
		default:
		}
		var zero T
		return zero, fmt.Errorf("no answer within %v: %w", timeout, ctx.Err())
	}
}

// refuse counts a reply or message that is not what the Fleet sent, and
// treats Redis as down: its state cannot be trusted.
func (f *Fleet) refuse(what string) {
	f.invalid.Add(1)
	f.down(errors.New("invalid " + what))
}

// down falls back to each process's own state, once per outage, and
// starts probing for Redis's return.
func (f *Fleet) down(err error) {
	if f.up.Swap(false) {
		f.downs.Add(1)
		// Redis that goes down and up again at once (a key that keeps
		// failing a script) is logged once a minute, not at each turn.
		now := time.Now().UnixNano()
		if last := f.warned.Load(); last == 0 || now-last > int64(time.Minute) {
			f.warned.Store(now)
			f.log.Warn("httpretry/fleet: Redis is unreachable or wrong; each process keeps its own state until it is back", "err", err)
		} else {
			f.log.Debug("httpretry/fleet: Redis is unreachable or wrong again", "err", err)
		}
	} else {
		f.log.Debug("httpretry/fleet: Redis is still unreachable or wrong", "err", err)
	}
	f.probe()
}

// probe syncs with Redis every 250 ms until it answers, and then the
// processes share state again. One probe runs at a time; a fall-back
// that comes as it ends keeps it going.
func (f *Fleet) probe() {
	if !f.probing.CompareAndSwap(false, true) {
		return
	}
	if !f.spawn(func() {
		for {
			select {
			case <-time.After(250 * time.Millisecond):
			case <-f.ctx.Done():
				f.probing.Store(false)
				return
			}
			if !f.sync() {
				continue
			}
			f.probing.Store(false)
			// A fall-back between the sync and the line above found a
			// probe running and started none: this one goes on.
			if f.up.Load() || !f.probing.CompareAndSwap(false, true) {
				return
			}
		}
	}) {
		f.probing.Store(false)
	}
}

// spawn runs fn on a goroutine that Close waits for, unless f is closed.
func (f *Fleet) spawn(fn func()) bool {
	f.life.Lock()
	defer f.life.Unlock()
	if f.closed {
		return false
	}
	f.wg.Go(fn)
	return true
}

// newID names this process in the trials it holds.
func newID() string {
	return strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatUint(rand.Uint64(), 36)
}
