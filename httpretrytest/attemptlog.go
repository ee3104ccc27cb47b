package httpretrytest

import (
	"sync"

	"github.com/seedhq/httpretry"
)

// AttemptLog collects what an httpretry.Transport reports to its OnAttempt
// hook, for tests that check the decisions (class, delay, why retrying
// stopped) rather than what the upstream saw:
//
//	var log httpretrytest.AttemptLog
//	tr := &httpretry.Transport{Base: upstream, OnAttempt: log.Record}
//
// The zero AttemptLog is empty and ready. It is safe for concurrent use.
type AttemptLog struct {
	mu  sync.Mutex
	all []httpretry.Attempt
}

// Record appends a. Its signature fits httpretry.Transport.OnAttempt. The
// recorded Attempt keeps its Request and Response; a test must not read or
// close that response's body, which belongs to the Transport or its caller.
func (l *AttemptLog) Record(a httpretry.Attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, a)
}

// Attempts returns a copy of every Attempt recorded so far, in order.
func (l *AttemptLog) Attempts() []httpretry.Attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]httpretry.Attempt(nil), l.all...)
}
