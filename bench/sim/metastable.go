package sim

import (
	"time"

	"github.com/seedhq/httpretry/backoff"
)

// MetastableConfig describes scenario C2, the retry example of Bronson et
// al., "Metastable Failures in Distributed Systems" (HotOS 2021) §2.1: one
// client process sends Rate requests per second (Poisson) to a FIFO server
// that serves Capacity per second and works through abandoned attempts too.
// An attempt not answered within Timeout is abandoned and retried once
// (MaxAttempts 2) if the budget allows, charged as a timeout retry. During
// the blip [BlipStart, BlipEnd) the network holds every packet and delivers
// it when the blip clears.
type MetastableConfig struct {
	Rate        float64 // λ, requests per second
	Capacity    float64 // μ, requests served per second
	Timeout     time.Duration
	MaxAttempts int
	BlipStart   time.Duration
	BlipEnd     time.Duration
	Duration    time.Duration // requests arrive in [0, Duration)
	OneWay      time.Duration // network delay of each message outside the blip
	Strategy    backoff.Strategy
	NewBudget   func() Budget // nil: no budget
}

// DefaultMetastable is Bronson's system: λ = 280/s against μ = 300/s, a 1 s
// timeout, one retry, a 10 s blip from t = 10 s, and httpretry's default
// backoff before the retry.
func DefaultMetastable(d time.Duration) MetastableConfig {
	return MetastableConfig{
		Rate: 280, Capacity: 300, Timeout: time.Second, MaxAttempts: 2,
		BlipStart: 10 * time.Second, BlipEnd: 20 * time.Second, Duration: d,
		OneWay: 500 * time.Microsecond, Strategy: backoff.Default(),
	}
}

// MetastableRun is the outcome of one run of scenario C2, per second.
type MetastableRun struct {
	Sent    []int // attempts sent in each second
	Goodput []int // answers that arrived in time, per second
	// Backlog is the work queued at the server, in requests, when the blip
	// cleared and the held packets arrived.
	Backlog float64
	// Recovered is when goodput first stays above RecoveryGoodput for a
	// whole RecoveryWindow after the blip; 0 if it never does.
	Recovered time.Duration
	// FirstGoodput is the start of the first second after the blip with
	// any goodput; 0 if there is none. RunMetastableTransport sets it.
	FirstGoodput time.Duration
}

// Recovery criterion (ours; the paper gives none): the first 5 s window
// with goodput above 250 per second.
const (
	RecoveryGoodput = 250
	RecoveryWindow  = 5
)

const (
	msSend uint8 = iota
	msArrive
	msAnswer
	msTimeout
)

// RunMetastable runs scenario C2 once.
func RunMetastable(c MetastableConfig, runSeed uint64) MetastableRun {
	r := &randStream{Stream(runSeed, 0)}
	var budget Budget
	if c.NewBudget != nil {
		budget = c.NewBudget()
	}
	// attempt state: 0 pending, 1 answered, 2 abandoned
	type request struct {
		attempt int
		state   uint8
		prev    time.Duration
	}
	var (
		q    queue
		reqs []request
		run  MetastableRun
		busy time.Duration // when the server finishes the work queued so far
		svc  = time.Duration(float64(time.Second) / c.Capacity)
	)
	deliver := func(t time.Duration) time.Duration {
		if t >= c.BlipStart && t < c.BlipEnd {
			t = c.BlipEnd
		}
		return t + c.OneWay
	}
	count := func(s []int, t time.Duration) []int {
		i := int(t / time.Second)
		for len(s) <= i {
			s = append(s, 0)
		}
		s[i]++
		return s
	}
	for t := time.Duration(0); ; {
		t += time.Duration(r.ExpFloat64() / c.Rate * float64(time.Second))
		if t >= c.Duration {
			break
		}
		q.push(t, msSend, int32(len(reqs)), 1)
		reqs = append(reqs, request{})
	}
	for q.len() > 0 {
		e := q.pop()
		rq := &reqs[e.who]
		now := epoch.Add(e.at)
		switch e.kind {
		case msSend:
			if e.val == 1 && budget != nil {
				budget.BeginAt(now)
			}
			rq.attempt, rq.state = int(e.val), 0
			run.Sent = count(run.Sent, e.at)
			q.push(deliver(e.at), msArrive, e.who, e.val)
			q.push(e.at+c.Timeout, msTimeout, e.who, e.val)
		case msArrive:
			busy = max(busy, e.at) + svc
			if e.at == c.BlipEnd+c.OneWay {
				run.Backlog = max(run.Backlog, float64(busy-e.at)/float64(svc))
			}
			q.push(deliver(busy), msAnswer, e.who, e.val)
		case msAnswer:
			if int(e.val) != rq.attempt || rq.state != 0 {
				continue // an abandoned attempt, served for nothing
			}
			rq.state = 1
			run.Goodput = count(run.Goodput, e.at)
			if budget != nil {
				budget.SucceededAt(now, rq.attempt > 1, rq.attempt > 1)
			}
		case msTimeout:
			if int(e.val) != rq.attempt || rq.state != 0 {
				continue
			}
			rq.state = 2
			if rq.attempt >= c.MaxAttempts || (budget != nil && !budget.AllowRetryAt(now, true)) {
				continue
			}
			d := c.Strategy.Delay(rq.attempt, rq.prev, r.Rand)
			rq.prev = d
			q.push(e.at+d, msSend, e.who, int64(rq.attempt+1))
		}
	}
	run.Recovered = recovered(run.Goodput, c.BlipEnd, c.Duration)
	return run
}

// recovered returns the start of the first RecoveryWindow-second window at
// or after from (and ending by end) whose mean goodput exceeds
// RecoveryGoodput, or 0.
func recovered(goodput []int, from, end time.Duration) time.Duration {
	first := int(from / time.Second)
	last := min(len(goodput), int(end/time.Second))
	for s := first; s+RecoveryWindow <= last; s++ {
		sum := 0
		for _, g := range goodput[s : s+RecoveryWindow] {
			sum += g
		}
		if sum > RecoveryGoodput*RecoveryWindow {
			return time.Duration(s) * time.Second
		}
	}
	return 0
}

// firstGoodput returns the start of the first second in [from, end) with
// goodput, or 0.
func firstGoodput(goodput []int, from, end time.Duration) time.Duration {
	for s := int(from / time.Second); s < min(len(goodput), int(end/time.Second)); s++ {
		if goodput[s] > 0 {
			return time.Duration(s) * time.Second
		}
	}
	return 0
}

// RecoveryLimit is the fastest recovery a client can bring about: the
// backlog left by the blip drains at μ − λ requests per second once the
// load is back to λ. Faster needs the server to shed.
func (c MetastableConfig) RecoveryLimit(backlog float64) time.Duration {
	return time.Duration(backlog / (c.Capacity - c.Rate) * float64(time.Second))
}

// MeanRate returns the mean of per-second counts over [from, to).
func MeanRate(perSecond []int, from, to time.Duration) float64 {
	a, b := int(from/time.Second), min(len(perSecond), int(to/time.Second))
	if b <= a {
		return 0
	}
	sum := 0
	for _, v := range perSecond[a:b] {
		sum += v
	}
	return float64(sum) / float64(b-a)
}
