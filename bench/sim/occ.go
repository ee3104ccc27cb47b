package sim

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/seedhq/httpretry/backoff"
)

// Mode is a named backoff strategy, as compared in a scenario.
type Mode struct {
	Name     string
	Strategy backoff.Strategy
}

// Brooker's simulator (aws-arch-backoff-simulator@66cb169): base 5 ms, cap
// 2000 ms. His counter is incremented before the first backoff, so his first
// retry's ceiling is 2·base; ours (n = 1) is Base, hence Base = 10 ms for the
// exponential family. Decorrelated starts from sleep = base = 5 ms in both.
const (
	occBase = 5 * time.Millisecond
	occCap  = 2000 * time.Millisecond
)

// OCCModes returns the strategies of scenario A with Brooker's parameters:
// his five (none, exponential, equal, full, decorrelated) and two modes
// added to his simulator for the reference (±10 % and full jitter with a
// doubled ceiling, the mean-matched variant).
func OCCModes() []Mode {
	return append([]Mode{{"none", backoff.Constant(0)}}, jitterModes(occBase, occCap)...)
}

// jitterModes returns the jittered exponential family on Brooker's index
// convention, shared by scenarios A and B: his first retry's ceiling is
// 2·base and ours (n = 1) is Base, so the exponential strategies get Base =
// 2·base; decorrelated starts from base in both. In order: exponential
// without jitter, equal, full, decorrelated, ±10 %, and full jitter with a
// doubled ceiling (the variant whose mean sleep matches no jitter's).
func jitterModes(base, capd time.Duration) []Mode {
	exp := func(j backoff.Jitter, b time.Duration) backoff.Exponential {
		return backoff.Exponential{Base: b, Cap: capd, Jitter: j}
	}
	pct := exp(backoff.PercentJitter, 2*base)
	pct.Percent = 0.1
	return []Mode{
		{"exponential", exp(backoff.NoJitter, 2*base)},
		{"equal", exp(backoff.EqualJitter, 2*base)},
		{"full", exp(backoff.FullJitter, 2*base)},
		{"decorrelated", backoff.Decorrelated{Base: base, Cap: capd}},
		{"percent10", pct},
		{"full2x", exp(backoff.FullJitter, 4*base)},
	}
}

// OCCClientCounts are the client counts of Brooker's sweep: 10, 20, …, 190.
func OCCClientCounts() []int {
	var cs []int
	for c := 10; c <= 190; c += 10 {
		cs = append(cs, c)
	}
	return cs
}

// OCCRun is the outcome of one run of scenario A.
type OCCRun struct {
	Calls    int           // conditional writes sent by all clients, failed ones included
	Makespan time.Duration // when the last client's successful write reply arrived
}

const (
	occReadAtServer uint8 = iota
	occReadReply
	occWriteAtServer
	occWriteReply
)

// RunOCC runs Brooker's contention model once: clients all start at t = 0
// to update one row with a read and a conditional write; each of the four
// one-way messages of an attempt takes |N(10 ms, 2 ms)|; a failed write
// waits s.Delay(attempt, prev) after its reply before reading again.
func RunOCC(clients int, s backoff.Strategy, runSeed uint64) OCCRun {
	type client struct {
		attempt int
		prev    time.Duration
	}
	cs := make([]client, clients)
	rs := make([]*randStream, clients)
	var q queue
	q.ev = make([]event, 0, clients)
	for c := range cs {
		rs[c] = &randStream{Stream(runSeed, c)}
		q.push(rs[c].net(), occReadAtServer, int32(c), 0)
	}
	var version int64
	var run OCCRun
	for q.len() > 0 {
		e := q.pop()
		c := e.who
		r := rs[c]
		switch e.kind {
		case occReadAtServer:
			q.push(e.at+r.net(), occReadReply, c, version)
		case occReadReply:
			q.push(e.at+r.net(), occWriteAtServer, c, e.val)
		case occWriteAtServer:
			run.Calls++
			var ok int64
			if e.val == version {
				version++
				ok = 1
			}
			q.push(e.at+r.net(), occWriteReply, c, ok)
		case occWriteReply:
			if e.val == 1 {
				run.Makespan = e.at
				continue
			}
			cl := &cs[c]
			cl.attempt++
			d := s.Delay(cl.attempt, cl.prev, r.Rand)
			cl.prev = d
			q.push(e.at+r.net()+d, occReadAtServer, c, 0)
		}
	}
	return run
}

// randStream adds the network delay of Brooker's model to a client's
// stream: |N(10, 2)| ms, a variance of 4 ms² as the blog says.
type randStream struct{ *rand.Rand }

func (r *randStream) net() time.Duration {
	return time.Duration(math.Abs(10+2*r.NormFloat64()) * float64(time.Millisecond))
}

// OCCPoint is scenario A's result for one mode and client count.
type OCCPoint struct {
	Mode     string
	Clients  int
	Calls    Summary
	Makespan Summary // in milliseconds
}

// RunOCCPoint runs one mode at one client count runs times; run i uses the
// seed RunSeed(seed, clients, i), so every mode sees the same network draws
// for as long as its clients stay in step.
func RunOCCPoint(m Mode, clients, runs int, seed uint64) OCCPoint {
	calls := make([]float64, runs)
	span := make([]float64, runs)
	for i := range runs {
		r := RunOCC(clients, m.Strategy, RunSeed(seed, clients, i))
		calls[i] = float64(r.Calls)
		span[i] = float64(r.Makespan) / float64(time.Millisecond)
	}
	return OCCPoint{Mode: m.Name, Clients: clients, Calls: Summarize(calls), Makespan: Summarize(span)}
}
