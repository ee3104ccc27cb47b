package httpretry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"time"
)

// body holds what is needed to give every attempt its own request body.
type body struct {
	first   io.ReadCloser                 // the first attempt's body: the caller's, a buffer, or a stream
	getBody func() (io.ReadCloser, error) // nil when the body cannot be sent again
	none    bool                          // the request has no body, so it can always be sent again
}

// replayable reports whether a retry can get a fresh body.
func (b *body) replayable() bool { return b.none || b.getBody != nil }

// next returns the body for attempt n (1 for the first).
func (b *body) next(n int) (io.ReadCloser, error) {
	if n == 1 || b.none {
		return b.first, nil
	}
	rc, err := b.getBody()
	if err != nil {
		return nil, fmt.Errorf("%w: GetBody: %w", ErrRequestBody, err)
	}
	return rc, nil
}

// prepareBody decides how req's body is replayed. The caller's GetBody is
// used when present: the first attempt sends req.Body itself and later ones
// call GetBody, so nothing is copied. Otherwise up to limit bytes are
// buffered; a longer body (or any body when limit < 0) is streamed once,
// starting with what was already read. Buffering ends as soon as ctx does,
// with the context's error, as net/http's own sending would. On error
// req.Body has been closed.
func prepareBody(ctx context.Context, req *http.Request, limit int64) (body, error) {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return body{first: req.Body, none: true}, nil
	case req.GetBody != nil:
		return body{first: req.Body, getBody: req.GetBody}, nil
	case limit < 0 || req.ContentLength > limit:
		return body{first: req.Body}, nil
	}
	// One byte past the limit tells a body that does not fit; a limit of
	// math.MaxInt64 means no limit and must not overflow.
	buf, err := readCtx(ctx, req.Body, min(limit, math.MaxInt64-1)+1, req.ContentLength)
	if err != nil {
		req.Body.Close()
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return body{}, fmt.Errorf("%w: reading it for replay: %w", ErrRequestBody, err)
	}
	if int64(buf.Len()) > limit {
		return body{first: &streamBody{io.MultiReader(buf, req.Body), req.Body}}, nil
	}
	req.Body.Close()
	if req.ContentLength > 0 && int64(buf.Len()) != req.ContentLength {
		// Every attempt would fail the same way in the inner transport.
		return body{}, fmt.Errorf("%w: ContentLength is %d but the body holds %d bytes", ErrRequestBody, req.ContentLength, buf.Len())
	}
	data := buf.Bytes()
	return body{
		first: io.NopCloser(bytes.NewReader(data)),
		getBody: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		},
	}, nil
}

// readCtx reads up to n bytes of r, or until ctx ends; size is the
// expected length, if known. When ctx can end, the read runs on a goroutine
// that stays until it returns: when ctx ends, the caller gets the context's
// error at once and closes r, which unblocks net/http's bodies and pipes.
func readCtx(ctx context.Context, r io.Reader, n, size int64) (*bytes.Buffer, error) {
	buf := new(bytes.Buffer)
	if size > 0 && size < n && size <= maxPresize {
		// Room for the body and for the read that finds its end: ReadFrom
		// wants bytes.MinRead free before each read, and would double a
		// buffer that is exactly full. A larger declared length is not
		// trusted to size anything: the buffer grows as bytes arrive.
		buf.Grow(int(size) + bytes.MinRead)
	}
	if ctx.Done() == nil {
		_, err := buf.ReadFrom(io.LimitReader(r, n))
		return buf, err
	}
	done := make(chan error, 1)
	go func() {
		_, err := buf.ReadFrom(io.LimitReader(r, n))
		done <- err
	}()
	select {
	case err := <-done:
		return buf, err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// maxPresize is the largest declared ContentLength a replay buffer is sized
// for before any byte arrives.
const maxPresize = 16 << 20

// streamBody sends the buffered prefix and then the rest of the caller's
// body, closing the caller's body when closed.
type streamBody struct {
	io.Reader
	orig io.Closer
}

func (s *streamBody) Close() error { return s.orig.Close() }

// Draining a discarded response lets its connection be reused. It is
// bounded in bytes and in time: a longer or slower body is closed unread,
// which costs only that connection.
const (
	drainLimit   = 64 << 10
	drainTimeout = 250 * time.Millisecond
)

// drain reads what is left of resp's body, up to drainLimit bytes and for
// at most drainTimeout, and closes it exactly once. When the whole body
// arrived, it returns a copy of resp holding the body in memory, which can
// still be returned to the caller if the retry that called for the drain
// is not sent; otherwise nil, as for the body of a 101 Switching Protocols
// response, which is a connection. A body that trickles is closed from a
// timer, or when ctx ends, which unblocks the read: net/http's HTTP/1 and
// HTTP/2 bodies allow Close during Read.
func drain(ctx context.Context, resp *http.Response) *http.Response {
	held := *resp
	rc := resp.Body
	if rc == nil || rc == http.NoBody {
		return &held
	}
	resp.Body = http.NoBody // drained: discard has nothing left to do
	var once sync.Once
	closeRC := func() { once.Do(func() { rc.Close() }) }
	// The drain ends at its bounds or with the caller's context, whichever
	// comes first: a Base whose body ignores the context must not keep the
	// caller past its deadline.
	timer := time.AfterFunc(drainTimeout, closeRC)
	stopCtx := context.AfterFunc(ctx, closeRC)
	var buf bytes.Buffer
	_, err := buf.ReadFrom(io.LimitReader(rc, drainLimit))
	complete := err == nil && buf.Len() < drainLimit // a body of exactly 64 KiB may have more
	if _, ok := rc.(io.Writer); ok {
		// A switched protocol's connection (101): no copy stands for it.
		complete = false
	}
	if !timer.Stop() || !stopCtx() {
		complete = false // cut short
	}
	closeRC()
	if !complete {
		return nil
	}
	held.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
	return &held
}

// discard drains and closes resp's body when nobody will read it.
func discard(ctx context.Context, resp *http.Response) {
	if resp != nil && resp.Body != nil && resp.Body != http.NoBody {
		drain(ctx, resp)
	}
}
