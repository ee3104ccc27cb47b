package replay

import (
	"fmt"
	"io"
	"sync"
)

// recording is the copy of the caller's body as Base read it, for the
// attempts after the first: each reader reads the copy from its start,
// then the caller's body on from where the copy ends, copying it on the
// way. Reads of the caller's body are serialised.
type recording struct {
	src   io.ReadCloser
	limit int64
	size  int64 // the declared ContentLength; 0 or less when unknown

	srcIO ioLock // held for a Read of src

	mu      sync.Mutex
	buf     []byte                 // what was read of src, while it fits in limit
	got     int64                  // bytes read of src
	eof     bool                   // src is read to its end
	over    bool                   // src held more than limit: buf is dropped
	err     error                  // src's error, other than io.EOF, or a ContentLength it does not match
	reading *sentBody              // the reader inside a Read of src
	readers map[*sentBody]struct{} // the readers not yet closed
	open    int                    // readers not yet closed
	ended   bool                   // the call is over
	closed  bool                   // src is closed
	broken  error                  // src was closed to end a Read in progress
}

func newRecording(src io.ReadCloser, limit, size int64) *recording {
	r := &recording{src: src, limit: limit, size: size, srcIO: newIOLock()}
	if size > 0 && size <= min(limit, maxPresize) {
		r.buf = make([]byte, 0, size)
	}
	return r
}

// maxPresize is the largest declared ContentLength a copy is sized for
// before any byte arrives.
const maxPresize = 16 << 20

func (r *recording) reader() *sentBody {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open++
	b := &sentBody{rec: r, sem: make(chan struct{}, 1)}
	if r.readers == nil {
		r.readers = map[*sentBody]struct{}{}
	}
	r.readers[b] = struct{}{}
	return b
}

// aheadOfOthers reports whether another reader is open, which a read by b
// past the limit would leave without the bytes it has not read yet.
func (r *recording) aheadOfOthers(b *sentBody) bool {
	for o := range r.readers {
		if o != b {
			return true
		}
	}
	return false
}

func (r *recording) replayable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.over && r.err == nil && r.broken == nil
}

func (r *recording) why() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.err != nil:
		return r.err
	case r.broken != nil:
		return r.broken
	}
	return errTooLarge
}

// read reads the recording for reader b, from b's position.
func (r *recording) read(b *sentBody, p []byte) (int, error) {
	for {
		r.mu.Lock()
		switch {
		case b.pos < r.got:
			if r.over {
				r.mu.Unlock()
				return 0, errTooLarge // the copy this reader needs was dropped
			}
			n := copy(p, r.buf[b.pos:])
			b.pos += int64(n)
			r.mu.Unlock()
			return n, nil
		case r.eof:
			r.mu.Unlock()
			return 0, io.EOF
		case r.err != nil:
			err := r.err
			r.mu.Unlock()
			return 0, err
		case r.closed:
			r.mu.Unlock()
			return 0, errDetached
		}
		r.mu.Unlock()
		r.srcIO.Lock()
		r.mu.Lock()
		behind := b.pos < r.got || r.eof || r.err != nil // another reader read on meanwhile
		if !behind && !r.over && r.got+int64(len(p)) > r.limit && r.aheadOfOthers(b) {
			// Past the limit the copy is dropped: the reader that runs
			// ahead of the others (a signer's copy from GetBody) stops
			// there, not the others.
			if room := r.limit - r.got; room > 0 {
				p = p[:room]
			} else {
				r.mu.Unlock()
				r.srcIO.Unlock()
				return 0, errTooLarge
			}
		}
		if !behind {
			r.reading = b
		}
		r.mu.Unlock()
		if behind {
			r.srcIO.Unlock()
			continue
		}
		n, err := r.src.Read(p)
		r.mu.Lock()
		r.reading = nil
		n, err = r.note(p, n, err)
		b.pos = r.got
		r.mu.Unlock()
		r.srcIO.Unlock()
		return n, err
	}
}

// note records n bytes of p read from src with err, checking them against
// the declared length as net/http would, and returns what the reader gets.
func (r *recording) note(p []byte, n int, err error) (int, error) {
	switch {
	case r.size > 0 && r.got+int64(n) > r.size:
		n = int(r.size - r.got)
		err = fmt.Errorf("ContentLength is %d but the body holds more", r.size)
	case err == io.EOF && r.size > 0 && r.got+int64(n) < r.size:
		err = fmt.Errorf("ContentLength is %d but the body holds %d bytes", r.size, r.got+int64(n))
	}
	if n > 0 {
		if !r.over && r.got+int64(n) <= r.limit {
			r.buf = append(r.buf, p[:n]...)
		} else {
			r.over, r.buf = true, nil
		}
		r.got += int64(n)
	}
	switch {
	case err == io.EOF:
		r.eof = true
		r.closeLocked() // the copy holds it all, or nobody can read it again: src is done with
	case err != nil && r.err == nil && !r.closed:
		r.err = err
	}
	return n, err
}

// close ends reader b. Closing the reader inside a Read of src is how Base
// ends a Read that blocks (net/http does when the attempt is cancelled):
// only closing src ends it, and then the body cannot be sent again.
func (r *recording) close(b *sentBody) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open--
	delete(r.readers, b)
	if r.reading == b && !r.closed {
		r.broken = errInterrupted
		r.closeLocked()
		return
	}
	if r.open == 0 && r.ended {
		r.closeLocked()
	}
}

// end notes that the call is over: src is closed once its last reader is.
func (r *recording) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
	if r.open == 0 {
		r.closeLocked()
	}
}

func (r *recording) closeLocked() {
	if !r.closed {
		r.closed = true
		r.src.Close()
	}
}
