package replay

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ioLock serialises the reads of a stream. It is a channel rather than a
// sync.Mutex so that a reader waiting for another's Read, which may wait
// for the caller's producer, waits as a channel receive does (durably, in
// a synctest bubble).
type ioLock chan struct{}

func newIOLock() ioLock  { return make(ioLock, 1) }
func (l ioLock) Lock()   { l <- struct{}{} }
func (l ioLock) Unlock() { <-l }

// tryLock takes l if no Read holds it.
func (l ioLock) tryLock() bool {
	select {
	case l <- struct{}{}:
		return true
	default:
		return false
	}
}

// lockCtx takes l, waiting at most until ctx ends: a reader inside a Read
// of the stream may stay there for as long as the caller's reader blocks.
func (l ioLock) lockCtx(ctx context.Context) error {
	if l.tryLock() {
		return nil // free: taken whatever ctx says, as a select would only at random
	}
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrBusy, context.Cause(ctx))
	}
}

// retireLeftovers releases, once the call is over, the readers that no
// one can still be reading: all but one inside a Read, or the last read
// or the last made if it has not reached the end. net/http does not always
// close a body it replaced with a copy from GetBody, and the caller's body
// must be closed all the same.
func (r *Replay) retireLeftovers() {
	var keep *sentBody
	for _, b := range r.sent {
		if keep == nil || b.lastUse() > keep.lastUse() {
			keep = b
		}
	}
	for _, b := range r.sent {
		if b != keep && !b.busy() || b == keep && b.atEOF() && !b.busy() {
			b.retire()
		}
	}
}

// stream is one underlying body that readers share: the caller's, or one
// GetBody returned. Reads (and GetBody) are serialised by io; a stream that
// can seek is moved to each reader's own position before it reads. Close
// never waits for a Read in progress: closing is how a Read is ended.
type stream struct {
	rc     io.ReadCloser
	seeker io.Seeker // nil when rc cannot seek
	io     ioLock    // the replay's streamIO in GetBody mode

	// Guarded by io.
	at    *sentBody // the reader whose position rc is at; nil: unknown
	start int64     // where a new reader starts

	mu      sync.Mutex // guards the rest; never held across a Read
	reading *sentBody  // the reader inside a Read of rc
	broke   bool       // rc was closed to end a Read: it cannot be read again
	open    int        // readers not yet closed
	ended   bool       // no reader will be made (or, for GetBody's, each closes it): close rc once open is 0
	closed  bool
}

// newStream returns the stream of rc, its reads serialised by l (nil: a
// lock of its own). closeWithReaders closes it whenever its last reader is
// closed, as net/http closes each body it is given; otherwise it closes once
// the call is over, too.
func newStream(rc io.ReadCloser, l ioLock, closeWithReaders bool) *stream {
	if l == nil {
		l = newIOLock()
	}
	l.Lock()
	defer l.Unlock()
	return newStreamLocked(rc, l, closeWithReaders)
}

func newStreamLocked(rc io.ReadCloser, l ioLock, closeWithReaders bool) *stream {
	st := &stream{rc: rc, io: l, ended: closeWithReaders}
	if s, ok := rc.(io.Seeker); ok {
		if pos, err := s.Seek(0, io.SeekCurrent); err == nil {
			st.seeker, st.start = s, pos
		}
	}
	return st
}

func (st *stream) reader() *sentBody {
	st.io.Lock()
	defer st.io.Unlock()
	return st.readerLocked()
}

// readerLocked returns a new reader of st from its start.
func (st *stream) readerLocked() *sentBody {
	b := &sentBody{st: st, pos: st.start, sem: make(chan struct{}, 1)}
	st.mu.Lock()
	st.open++
	st.mu.Unlock()
	return b
}

// rewoundReader returns a new reader of st from its start, having moved
// st there at once: a stream that cannot go back fails now, before a
// retry is sent, rather than inside Base.
func (st *stream) rewoundReader() (*sentBody, error) {
	if !st.io.tryLock() {
		return nil, ErrBusy
	}
	defer st.io.Unlock()
	b := st.readerLocked()
	if _, err := st.seeker.Seek(b.pos, io.SeekStart); err != nil {
		st.mu.Lock()
		st.open--
		st.mu.Unlock()
		return nil, err
	}
	st.at = b
	return b, nil
}

func (st *stream) interrupted() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.broke
}

// rewound notes that GetBody returned st again: it is the caller's to
// offer again, closed or not, and it may have moved it, so where it is is
// read anew, and a new reader starts there.
func (st *stream) rewound() {
	st.mu.Lock()
	st.closed, st.broke = false, false
	st.mu.Unlock()
	st.at = nil
	if st.seeker != nil {
		if pos, err := st.seeker.Seek(0, io.SeekCurrent); err == nil {
			st.start = pos
		}
	}
}

// end notes that the call is over: the stream is closed once its last
// reader is.
func (st *stream) end() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ended = true
	st.closeIfDone()
}

func (st *stream) closeIfDone() {
	if st.open == 0 && st.ended && !st.closed {
		st.closed = true
		st.rc.Close()
	}
}

// read reads st for reader b, from b's position.
func (st *stream) read(b *sentBody, p []byte) (int, error) {
	st.io.Lock()
	defer st.io.Unlock()
	st.mu.Lock()
	closed := st.closed
	st.mu.Unlock()
	if closed {
		return 0, errDetached
	}
	if st.seeker != nil && st.at != b {
		if _, err := st.seeker.Seek(b.pos, io.SeekStart); err != nil {
			return 0, fmt.Errorf("seek: %w", err)
		}
		st.at = b
	}
	st.mu.Lock()
	st.reading = b
	st.mu.Unlock()
	n, err := st.rc.Read(p)
	st.mu.Lock()
	st.reading = nil
	st.mu.Unlock()
	b.pos += int64(n)
	return n, err
}

// close ends reader b of st. Closing the reader inside a Read is how Base
// ends a Read that blocks (net/http does when an attempt fails or is
// cancelled): only closing rc ends it, and then rc cannot be read again.
func (st *stream) close(b *sentBody) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.open--
	if st.reading == b && !st.closed {
		st.closed, st.broke = true, true
		st.rc.Close()
		return
	}
	st.closeIfDone()
}

// sentBody is an attempt's request body, or a copy of it, as Base reads
// it: a reader of a stream or of the recording, with its own position.
type sentBody struct {
	st    *stream    // or
	rec   *recording // the copy as sent
	pos   int64      // in st, when it seeks; in rec
	sem   chan struct{}
	clock *atomic.Int64 // the replay's
	made  int64         // when it was made, by clock

	mu       sync.Mutex
	detached bool  // its reads fail: a later attempt's body was given out, or the call is over
	closed   bool  // Base closed it
	released bool  // no longer counted as a reader of its stream
	eof      bool  // a Read returned io.EOF
	read     int64 // when it was last read, by clock
	err      error // the body's own error, other than io.EOF, read before Base closed it
}

// release stops counting b as a reader of its stream, once.
func (b *sentBody) release() {
	b.mu.Lock()
	done := b.released
	b.released = true
	b.mu.Unlock()
	if done {
		return
	}
	if b.rec != nil {
		b.rec.close(b)
	} else {
		b.st.close(b)
	}
}

// retireLater detaches b, whose Read Base is inside: that Read goes on,
// the next one fails, and b is released once Base closes it.
func (b *sentBody) retireLater() {
	b.mu.Lock()
	b.detached = true
	b.mu.Unlock()
}

// retire detaches b and releases it: no read of it will reach its stream.
func (b *sentBody) retire() {
	b.mu.Lock()
	b.detached = true
	b.mu.Unlock()
	b.release()
}

// busy reports whether Base is inside a Read of b.
func (b *sentBody) busy() bool {
	select {
	case b.sem <- struct{}{}:
		<-b.sem
		return false
	default:
		return true
	}
}

func (b *sentBody) lastUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.read, b.made)
}

func (b *sentBody) atEOF() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof
}

func (b *sentBody) Read(p []byte) (int, error) {
	b.sem <- struct{}{}
	defer func() { <-b.sem }()
	b.mu.Lock()
	stop := b.detached || b.closed
	b.mu.Unlock()
	if stop {
		return 0, errDetached
	}
	var n int
	var err error
	if b.rec != nil {
		n, err = b.rec.read(b, p)
	} else {
		n, err = b.st.read(b, p)
	}
	b.mu.Lock()
	if b.clock != nil {
		b.read = b.clock.Add(1)
	}
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil && !b.closed && !b.detached && b.err == nil:
		b.err = err
	}
	b.mu.Unlock()
	return n, err
}

// Close closes the body as Base sees it. The stream under it is closed
// once its last reader is: at once for a stream GetBody made, once the
// call is over too for the caller's body. A copy as sent closes the
// caller's stream early only when Base closes it to end a Read in
// progress.
func (b *sentBody) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.release()
	return nil
}

// detach waits until Base is not inside a Read of b, for at most limit or
// until ctx ends, and then stops Base from reading on.
func (b *sentBody) detach(ctx context.Context, limit time.Duration) error {
	select {
	case b.sem <- struct{}{}:
	default:
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case b.sem <- struct{}{}:
		case <-timer.C:
			return errBodyBusy
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", errBodyBusy, context.Cause(ctx))
		}
	}
	<-b.sem
	b.retire()
	return nil
}

func (b *sentBody) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}
