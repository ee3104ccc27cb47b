package httpretry

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
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

// next returns the body and GetBody for attempt n (1 for the first).
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
// starting with what was already read. On error req.Body has been closed.
func prepareBody(req *http.Request, limit int64) (body, error) {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return body{first: req.Body, none: true}, nil
	case req.GetBody != nil:
		return body{first: req.Body, getBody: req.GetBody}, nil
	case limit < 0 || req.ContentLength > limit:
		return body{first: req.Body}, nil
	}
	var buf bytes.Buffer
	if req.ContentLength > 0 {
		buf.Grow(int(req.ContentLength) + 1)
	}
	_, err := buf.ReadFrom(io.LimitReader(req.Body, limit+1))
	if err != nil {
		req.Body.Close()
		return body{}, fmt.Errorf("%w: reading it for replay: %w", ErrRequestBody, err)
	}
	if int64(buf.Len()) > limit {
		return body{first: &streamBody{io.MultiReader(&buf, req.Body), req.Body}}, nil
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

// discard drains a bounded amount of resp's body and closes it exactly
// once. A body that trickles is closed from a timer, which unblocks the
// read: net/http's HTTP/1 and HTTP/2 bodies allow Close during Read.
func discard(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	body := resp.Body
	timer := time.AfterFunc(drainTimeout, func() { body.Close() })
	io.CopyN(io.Discard, body, drainLimit)
	if timer.Stop() {
		body.Close()
	}
}
