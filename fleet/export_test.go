package fleet

import "time"

// AgeFailuresForTest moves back by d when f last heard of each key's run
// of failures, as if d had passed.
func AgeFailuresForTest(f *Fleet, d time.Duration) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, e := range f.keys {
		e.mu.Lock()
		e.failedAt = e.failedAt.Add(-d)
		e.mu.Unlock()
	}
}
