package sim

import (
	"time"

	"github.com/seedhq/httpretry/backoff"
)

// StormConfig describes scenario C: Clients independent clients, each an
// open-loop Poisson source of Rate requests per second over Duration,
// against a server whose every attempt fails with probability Failure,
// whatever the load. A client makes at most MaxAttempts attempts per
// request, waits Strategy's delay plus a round trip between them, and asks
// its own Budget (a fresh one per client, as the Transport keeps one per
// host) before each retry.
type StormConfig struct {
	Clients     int
	Rate        float64       // requests per second per client
	Duration    time.Duration // requests arrive in [0, Duration)
	Failure     float64       // probability that an attempt fails
	MaxAttempts int
	RTT         time.Duration // mean of the exponential round-trip time
	Strategy    backoff.Strategy
	NewBudget   func() Budget // nil: no budget
}

// DefaultStorm is scenario C's setup, the open loop of Brooker's "Fixing
// retries with token buckets and circuit breakers" (2022): 100 clients at
// 10 rps, round trips of 10 ms on average, 4 attempts (httpretry's
// default), full jitter from 100 ms capped at 10 s.
func DefaultStorm(failure float64, d time.Duration) StormConfig {
	return StormConfig{
		Clients: 100, Rate: 10, Duration: d, Failure: failure, MaxAttempts: 4,
		RTT:      10 * time.Millisecond,
		Strategy: backoff.Exponential{Base: 100 * time.Millisecond, Cap: 10 * time.Second, Jitter: backoff.FullJitter},
	}
}

// StormResult counts scenario C's outcome over all clients.
type StormResult struct {
	Requests  int // first tries
	Attempts  int // all attempts, retries included
	Succeeded int // requests that ended in success
}

// AttemptsPerRequest is the load amplification A = attempts / first tries.
func (r StormResult) AttemptsPerRequest() float64 { return float64(r.Attempts) / float64(r.Requests) }

// Availability is the share of requests that ended in success.
func (r StormResult) Availability() float64 { return float64(r.Succeeded) / float64(r.Requests) }

const (
	stormAttempt uint8 = iota // an attempt is sent; its answer comes one RTT later
	stormAnswer               // the answer arrives; val holds the attempt number, negative if failed
)

// RunStorm runs scenario C once. Clients do not interact (the server's
// failures are independent of load and budgets are per client), so each
// client runs on its own clock.
func RunStorm(c StormConfig, runSeed uint64) StormResult {
	var res StormResult
	var q queue
	for id := range c.Clients {
		r := &randStream{Stream(runSeed, id)}
		var budget Budget
		if c.NewBudget != nil {
			budget = c.NewBudget()
		}
		type request struct{ prev time.Duration }
		var reqs []request
		q.ev = q.ev[:0]
		for t := time.Duration(0); ; {
			t += time.Duration(r.ExpFloat64() / c.Rate * float64(time.Second))
			if t >= c.Duration {
				break
			}
			q.push(t, stormAttempt, int32(len(reqs)), 1)
			reqs = append(reqs, request{})
		}
		res.Requests += len(reqs)
		for q.len() > 0 {
			e := q.pop()
			now := epoch.Add(e.at)
			switch e.kind {
			case stormAttempt:
				if e.val == 1 && budget != nil {
					budget.BeginAt(now)
				}
				res.Attempts++
				n := e.val
				if r.Float64() < c.Failure {
					n = -n
				}
				q.push(e.at+time.Duration(r.ExpFloat64()*float64(c.RTT)), stormAnswer, e.who, n)
			case stormAnswer:
				n := int(e.val)
				if n > 0 {
					res.Succeeded++
					if budget != nil {
						budget.SucceededAt(now, n > 1, false)
					}
					continue
				}
				n = -n
				if n >= c.MaxAttempts || (budget != nil && !budget.AllowRetryAt(now, false)) {
					continue
				}
				rq := &reqs[e.who]
				d := c.Strategy.Delay(n, rq.prev, r.Rand)
				rq.prev = d
				q.push(e.at+d, stormAttempt, e.who, int64(n+1))
			}
		}
	}
	return res
}

// StormBudgets are the budgets scenario C compares: none, httpretry's
// default (a token bucket with the AWS SDK's numbers) and a ratio budget
// with its defaults (10 % over a 10 s window, floor 1 retry per second).
func StormBudgets() []StormBudget {
	return []StormBudget{
		{"none", nil},
		{"default (token bucket)", DefaultBudget},
		{"ratio 10 %", RatioBudget},
	}
}

// StormBudget names a budget constructor.
type StormBudget struct {
	Name string
	New  func() Budget
}

// StormFailures returns the failure probabilities of scenario C.
func StormFailures() []float64 { return []float64{0, 0.01, 0.05, 0.10, 0.20, 0.50, 1} }
