package main

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
)

// faults stands in front of a fake service and fails requests as an
// upstream does: a share is answered 503 before the service sees it, a share
// is processed and then its answer lost (the connection drops), and in an
// outage every request is answered 503. Draws come from a seeded source, so
// a run that sends the same requests in the same order meets the same faults.
//
// The same file is in each SDK example (examples/stripe, examples/s3,
// examples/azblob, examples/openai, examples/sdk), so that each module
// stands alone when copied.
type faults struct {
	next http.Handler

	mu          sync.Mutex
	rnd         *rand.Rand
	unavailable float64 // share answered 503, not processed
	lost        float64 // share processed, then the connection dropped
	outage      bool
	seen        int // requests that reached the server
}

func newFaults(next http.Handler, seed uint64) *faults {
	return &faults{next: next, rnd: rand.New(rand.NewPCG(seed, seed))}
}

// set fails the given shares of the requests from now on.
func (f *faults) set(unavailable, lost float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unavailable, f.lost, f.outage = unavailable, lost, false
}

// setOutage answers every request 503 from now on, or none.
func (f *faults) setOutage(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outage = on
}

// requests returns how many requests reached the server, faulted or not.
func (f *faults) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen
}

func (f *faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen++
	draw := f.rnd.Float64()
	outage, unavailable, lost := f.outage, f.unavailable, f.lost
	f.mu.Unlock()

	switch {
	case outage || draw < unavailable:
		// A gateway's answer, not the service's: plain text.
		http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
	case draw < unavailable+lost:
		f.next.ServeHTTP(httptest.NewRecorder(), r) // applied; the answer is lost
		dropAfterFirstByte(w)
	default:
		f.next.ServeHTTP(w, r)
	}
}

// dropAfterFirstByte closes the connection after the first bytes of a status
// line. A connection dropped before any byte of the answer would be retried
// by net/http itself, once, for a request it deems replayable on a reused
// connection: a retry layer of its own, hidden from both httpretry and the
// SDK, which would blur the counts. Real upstreams do both.
func dropAfterFirstByte(w http.ResponseWriter) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err) // httptest.Server speaks HTTP/1.1, which can be hijacked
	}
	_, _ = buf.WriteString("HTTP/1.1 ")
	_ = buf.Flush()
	_ = conn.Close()
}
