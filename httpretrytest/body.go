package httpretrytest

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"
)

// ErrBodyClosed is what Read returns on a Body that was closed, as
// net/http's "read on closed response body".
var ErrBodyClosed = errors.New("httpretrytest: read on closed body")

// Body is an io.ReadCloser for request and response bodies in tests. It
// counts the bytes read and the calls to Close, and can deliver its bytes
// slowly or fail part-way. The bodies of a [Script]'s responses are Bodies,
// reachable from [Request].ResponseBody; a test can also send one as a
// request body.
//
// Create a Body with [NewBody] or [NewFillerBody] (the zero Body is not
// usable) and configure it with Slow and FailAfter before the first Read. Read and Close may be called
// from different goroutines: Close ends a Read that is pausing. Inside a
// testing/synctest bubble, create the Body inside the bubble, so that its
// pauses run on the bubble's fake clock.
type Body struct {
	mu      sync.Mutex
	src     io.Reader
	size    int64 // -1: unknown
	closer  func() error
	ctx     context.Context
	chunk   int
	pause   time.Duration
	fail    bool
	failAt  int64
	failErr error
	read    int64
	eof     bool
	closes  int
	done    chan struct{}
}

// NewBody returns a Body that reads content.
func NewBody(content string) *Body {
	return newBody(strings.NewReader(content), int64(len(content)))
}

// NewFillerBody returns a Body of n bytes of 'x' that holds none of them in
// memory: a gigabyte-long error page costs nothing.
func NewFillerBody(n int64) *Body {
	return newBody(io.LimitReader(filler{}, n), n)
}

func newBody(src io.Reader, size int64) *Body {
	return &Body{src: src, size: size, done: make(chan struct{})}
}

// Slow makes each Read wait for pause before it delivers at most chunk
// bytes (a chunk of 0 or less means no limit). The wait ends early when the
// Body is closed, with ErrBodyClosed, or, for a response body, when the
// request's context ends, with the context's cause. It returns b.
func (b *Body) Slow(chunk int, pause time.Duration) *Body {
	b.chunk, b.pause = chunk, pause
	return b
}

// FailAfter makes Read fail with err once n bytes have been read (err nil
// means io.ErrUnexpectedEOF, what net/http reports for a body whose
// connection dropped). It returns b.
func (b *Body) FailAfter(n int64, err error) *Body {
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	b.fail, b.failAt, b.failErr = true, n, err
	return b
}

// Read reads from the Body's content, honouring Slow and FailAfter.
func (b *Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	switch {
	case b.closes > 0:
		b.mu.Unlock()
		return 0, ErrBodyClosed
	case b.fail && b.read >= b.failAt:
		b.mu.Unlock()
		return 0, b.failErr
	}
	if b.chunk > 0 && len(p) > b.chunk {
		p = p[:b.chunk]
	}
	if b.fail && int64(len(p)) > b.failAt-b.read {
		p = p[:b.failAt-b.read]
	}
	pause, ctx, done := b.pause, b.ctx, b.done
	if b.size >= 0 && b.read >= b.size {
		pause = 0 // the end comes without a wait
	}
	b.mu.Unlock()

	if pause > 0 {
		if err := b.wait(ctx, done, pause); err != nil {
			return 0, err
		}
	}
	n, err := b.src.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.read += int64(n)
	if err != nil && !b.eof && ctx != nil && ctx.Err() != nil {
		// As with net/http, a body not yet read to its end fails with the
		// cause of the request's cancellation, whatever the source says.
		return n, context.Cause(ctx)
	}
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *Body) wait(ctx context.Context, done <-chan struct{}, d time.Duration) error {
	var ctxDone <-chan struct{}
	if ctx != nil {
		ctxDone = ctx.Done()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-done:
		return ErrBodyClosed
	case <-ctxDone:
		return context.Cause(ctx)
	}
}

// Close counts the call; the first one ends any pausing Read and makes
// every later Read fail with ErrBodyClosed.
func (b *Body) Close() error {
	b.mu.Lock()
	b.closes++
	first := b.closes == 1
	b.mu.Unlock()
	if !first {
		return nil
	}
	close(b.done)
	if b.closer != nil {
		return b.closer()
	}
	return nil
}

// Closes reports how many times Close was called.
func (b *Body) Closes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

// BytesRead reports how many bytes Read has delivered.
func (b *Body) BytesRead() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.read
}

// filler reads as an endless run of 'x'.
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}
