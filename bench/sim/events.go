package sim

import (
	"math/rand/v2"
	"time"
)

// event is one scheduled happening on the virtual clock. kind, who and val
// are interpreted by the scenario that scheduled it.
type event struct {
	at   time.Duration // virtual time since the start of the run
	seq  uint64        // insertion order: equal times pop first-in, first-out
	kind uint8
	who  int32
	val  int64
}

// queue is a binary min-heap of events ordered by (at, seq). It is typed, so
// pushing and popping allocate nothing once the slice has grown.
type queue struct {
	ev  []event
	seq uint64
}

func (q *queue) len() int { return len(q.ev) }

func (q *queue) push(at time.Duration, kind uint8, who int32, val int64) {
	q.seq++
	q.ev = append(q.ev, event{at: at, seq: q.seq, kind: kind, who: who, val: val})
	i := len(q.ev) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.ev[i], q.ev[p] = q.ev[p], q.ev[i]
		i = p
	}
}

func (q *queue) pop() event {
	top := q.ev[0]
	last := len(q.ev) - 1
	q.ev[0] = q.ev[last]
	q.ev = q.ev[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && q.less(l, m) {
			m = l
		}
		if r < last && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q.ev[i], q.ev[m] = q.ev[m], q.ev[i]
		i = m
	}
	return top
}

func (q *queue) less(i, j int) bool {
	a, b := &q.ev[i], &q.ev[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// Stream returns the random stream of one client in one run: a PCG
// generator seeded from the run's seed and the client's number, so every
// client has its own sequence and a run can be replayed exactly.
func Stream(runSeed uint64, client int) *rand.Rand {
	return rand.New(rand.NewPCG(mix(runSeed), mix(uint64(client)+0x9e3779b97f4a7c15)))
}

// RunSeed derives the seed of one run from a scenario's seed and the
// numbers that identify the run (client count, repetition, …).
func RunSeed(seed uint64, parts ...int) uint64 {
	s := mix(seed)
	for _, p := range parts {
		s = mix(s ^ uint64(p))
	}
	return s
}

// mix is SplitMix64's finaliser: nearby inputs give unrelated outputs.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// epoch is the wall-clock instant virtual time 0 maps to when a budget
// wants a time.Time. Any fixed instant works; budgets only compare times.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
