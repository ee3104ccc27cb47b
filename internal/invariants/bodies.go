package invariants

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// How the Transport gives each attempt its request body (body.go), as the
// model sees it. Nothing is read ahead of Base: the body of the first
// attempt is read as Base reads it.
const (
	modeNone    = iota // no body
	modeOnce           // the caller's body itself, sent once: one attempt allowed, or too large to copy
	modeGetBody        // Body, then GetBody for each later attempt
	modeSeek           // an io.Seeker, read again from its start
	modeCopy           // a copy of what Base read, up to MaxReplayBytes
)

var modeNames = []string{"none", "once", "GetBody", "seek", "copy"}

// bodyPlan is the model's view of how the call's body is sent.
type bodyPlan struct {
	mode         int
	tooLarge     bool // modeOnce because the copy could not hold it: attempts carry no GetBody
	getBodyFails bool // GetBody fails when a retry is about to be sent: the retry is refused
	seekFails    bool // Seek cannot rewind the body for a retry: the retry is refused too
	limit        int64
	size         int // the body's length
}

func (c *callSpec) bodyPlan(e *effPolicy) bodyPlan {
	p := bodyPlan{limit: e.maxReplay, size: c.bodyLen}
	switch {
	case c.body == bodyNone || c.body == bodyNoBody:
		p.mode = modeNone
	case e.maxAttempts <= 1:
		p.mode = modeOnce
	case c.hasGetBody():
		p.mode, p.getBodyFails = modeGetBody, c.body == bodyGetBodyFails
	case c.seekable():
		p.mode, p.seekFails = modeSeek, c.body == bodySeekFails
	case e.maxReplay < 0 || !c.clUnknown && int64(c.bodyLen+c.clDelta) > e.maxReplay:
		p.mode, p.tooLarge = modeOnce, true
	default:
		p.mode = modeCopy
	}
	return p
}

// hasGetBody reports whether the caller's request carries a GetBody.
func (c *callSpec) hasGetBody() bool {
	switch c.body {
	case bodyGetBody, bodyGetBodySlow, bodyGetBodyBreaks, bodyGetBodyFails, bodySharedSeek:
		return true
	}
	return false
}

// seekable reports whether the caller's body is an io.Seeker that can
// tell where it is.
func (c *callSpec) seekable() bool {
	switch c.body {
	case bodySeek, bodySeekSlow, bodySeekFails:
		return true
	}
	return false
}

// none reports whether the call has no body: always replayable.
func (p bodyPlan) none() bool { return p.mode == modeNone }

// sentBody reports whether Base reads a body of the Transport's, which
// tells a failure of the body itself from one of the connection.
func (p bodyPlan) sentBody() bool {
	return p.mode == modeGetBody || p.mode == modeSeek || p.mode == modeCopy
}

// attemptGetBody reports whether the attempts' requests carry a GetBody.
func (p bodyPlan) attemptGetBody(c *callSpec) bool {
	switch p.mode {
	case modeGetBody, modeSeek, modeCopy:
		return true
	case modeOnce:
		return !p.tooLarge && c.hasGetBody()
	}
	return false
}

// hedgeable reports whether the body allows an attempt alongside another.
func (p bodyPlan) hedgeable() bool {
	return p.mode != modeOnce && !p.getBodyFails
}

// rewindFails reports whether the body cannot be had again for a retry,
// which is then refused (StopNotReplayable) when it is about to be sent.
func (p bodyPlan) rewindFails() bool { return p.getBodyFails || p.seekFails }

// checkRewind checks that a retry whose body cannot be rewound is not
// sent: Seek failing, like GetBody failing, refuses the retry once its
// wait is over, so that the server never gets a request whose body breaks.
func (r *run) checkRewind(c *callRun, plan bodyPlan, recs []*baseRec) {
	if !plan.seekFails {
		return
	}
	// A hedge reads alongside the attempt it backs up: one sent while the
	// stream is still where the body starts needs no Seek that moves it,
	// and it is the other reader whose body breaks once the stream cannot
	// go back (seed 5070648).
	c.mu.Lock()
	hedged := map[int]bool{}
	for _, a := range c.attempts {
		if a.Hedge {
			hedged[a.N] = true
		}
	}
	c.mu.Unlock()
	read := false
	for _, b := range recs {
		if read && !hedged[b.n] {
			r.violate("%s: call%d: attempt %d was sent although its body could not be rewound (Seek fails), and failed with %v",
				defectSeekFailsSent, c.spec.idx, b.n, safeError(b.err))
			return
		}
		read = read || len(b.body) > 0 || b.bodyErr != nil || len(b.receipts) > 0
	}
}

// defectSeekFailsSent names a library defect the harness reports.
const defectSeekFailsSent = "library defect (seek-fails-sent)"

// replayableAfter reports whether the body can be sent again after attempt
// b, as the decision on b sees it: a copy that outgrew MaxReplayBytes, or
// whose source failed or was cut in the middle of a Read, cannot.
func (p bodyPlan) replayableAfter(b *baseRec, recs []*baseRec) bool {
	switch p.mode {
	case modeNone, modeGetBody, modeSeek:
		return true
	case modeOnce:
		return false
	}
	got, cut := 0, false
	for _, x := range recs {
		if x.n > b.n && !x.start.Before(b.end) {
			continue
		}
		got = max(got, len(x.signed))
		if x.unread || x.skipped {
			continue
		}
		got = max(got, len(x.body))
		switch {
		case x.bodyErr == nil:
		case x.ctxCause != nil || x.callerDone:
			cut = true // the attempt's context ended: its Read was cut, if one was in progress
		default:
			return false // the body's own error
		}
	}
	if cut && got < p.size {
		return false // a Read of the caller's body was cut: the copy ends there
	}
	return int64(got) <= p.limit
}

// errFromBody is what the model passes a classifier for an attempt whose
// request body failed while Base read it.
var errFromBody = errors.New("request body")

// reqBody is a request body that counts its closes and can be slow or
// break after some bytes. Close ends a pausing Read, as a pipe's does.
type reqBody struct {
	mu     sync.Mutex
	data   []byte
	off    int
	failAt int // -1: never
	chunk  int // bytes per Read when slow; 0: all
	pause  time.Duration
	closes int
	done   chan struct{}

	nopClose bool // Close is counted, and ends nothing (azcore's streams)

	pausing int           // Reads inside a pause now
	kick    chan struct{} // closed by unstick: pauses end at once
	kicked  bool
}

var errReqBody = errors.New("the request body's reader broke")

func newReqBody(data []byte, failAt, chunk int, pause time.Duration) *reqBody {
	return &reqBody{data: data, failAt: failAt, chunk: chunk, pause: pause, done: make(chan struct{}), kick: make(chan struct{})}
}

// paused reports whether a Read of b is inside a pause.
func (b *reqBody) paused() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pausing > 0
}

// unstick ends b's pauses, now and later, so that a Read that something
// holds on to returns without the clock moving.
func (b *reqBody) unstick() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.kicked {
		b.kicked = true
		close(b.kick)
	}
}

func (b *reqBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	closed, left, pause := b.closes > 0 && !b.nopClose, len(b.data)-b.off, b.pause > 0 && !b.kicked
	if pause && left > 0 {
		b.pausing++
	}
	b.mu.Unlock()
	if closed {
		return 0, errors.New("read on closed request body")
	}
	if left > 0 && pause {
		t := time.NewTimer(b.pause)
		var err error
		select {
		case <-t.C:
		case <-b.kick:
			t.Stop()
		case <-b.done:
			t.Stop()
			err = errors.New("read on closed request body")
		}
		b.mu.Lock()
		b.pausing--
		b.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failAt >= 0 && b.off >= b.failAt {
		return 0, errReqBody
	}
	if b.off >= len(b.data) {
		return 0, io.EOF
	}
	n := len(b.data) - b.off
	if b.chunk > 0 {
		n = min(n, b.chunk)
	}
	if b.failAt >= 0 {
		n = min(n, b.failAt-b.off)
	}
	n = copy(p, b.data[b.off:b.off+n])
	b.off += n
	return n, nil
}

func (b *reqBody) Close() error {
	b.mu.Lock()
	b.closes++
	first := b.closes == 1 && !b.nopClose
	b.mu.Unlock()
	if first {
		close(b.done)
	}
	return nil
}

// seekBody is a reqBody that is an io.Seeker: a file, a bytes.Reader
// without GetBody (aws-sdk-go-v2 builds its requests so).
type seekBody struct {
	*reqBody
	stuck bool // Seek tells where the body is, but cannot move it
}

var errSeek = errors.New("the request body cannot seek")

func (b *seekBody) Seek(offset int64, whence int) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	abs := offset
	switch whence {
	case io.SeekCurrent:
		abs += int64(b.off)
	case io.SeekEnd:
		abs += int64(len(b.data))
	}
	switch {
	case abs < 0:
		return 0, errors.New("seek before the start")
	case b.stuck && abs != int64(b.off):
		return 0, errSeek
	}
	b.off = int(min(abs, int64(len(b.data))))
	return abs, nil
}

// streamBody is a live stream: an io.Pipe that a goroutine of the
// caller's writes, 4 bytes every 7 ms, until the reader is closed.
type streamBody struct {
	pr     *io.PipeReader
	done   chan struct{} // closed with the reader: the writer ends
	mu     sync.Mutex
	closes int
}

func newStreamBody(data []byte) *streamBody {
	pr, pw := io.Pipe()
	b := &streamBody{pr: pr, done: make(chan struct{})}
	go func() {
		for i := 0; i < len(data); i += 4 {
			t := time.NewTimer(7 * ms)
			select {
			case <-t.C:
			case <-b.done:
				t.Stop()
				return
			}
			if _, err := pw.Write(data[i:min(i+4, len(data))]); err != nil {
				return // the reader was closed
			}
		}
		pw.Close()
	}()
	return b
}

func (b *streamBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *streamBody) Close() error {
	b.mu.Lock()
	b.closes++
	if b.closes == 1 {
		close(b.done)
	}
	b.mu.Unlock()
	return b.pr.Close()
}

func (b *streamBody) closeCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

func (b *reqBody) closeCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes
}

// payload is the request body's content.
func (c *callRun) payload() []byte {
	return []byte(strings.Repeat(fmt.Sprintf("payload-%d;", c.spec.idx), 10)[:c.spec.bodyLen])
}

// newBody returns a fresh request body of the call, kept for the checks.
func (c *callRun) newBody() *reqBody {
	chunk, pause := 0, time.Duration(0)
	if c.spec.body == bodySlow || c.spec.body == bodyGetBodySlow || c.spec.body == bodySeekSlow {
		chunk, pause = 4, 7*ms
	}
	b := newReqBody(c.payload(), c.spec.failAt, chunk, pause)
	c.mu.Lock()
	c.bodies = append(c.bodies, b)
	c.mu.Unlock()
	return b
}

// bodyPaused reports whether a Read of one of the call's bodies pauses.
func (c *callRun) bodyPaused() bool {
	c.mu.Lock()
	bodies := c.bodies
	c.mu.Unlock()
	return slices.ContainsFunc(bodies, (*reqBody).paused)
}

// unstickBodies ends the pauses of the call's bodies.
func (c *callRun) unstickBodies() {
	c.mu.Lock()
	bodies := c.bodies
	c.mu.Unlock()
	for _, b := range bodies {
		b.unstick()
	}
}

// request builds the call's request under ctx.
func (c *callRun) request(ctx context.Context) *http.Request {
	spec := c.spec
	u, err := url.Parse(c.rawURL)
	if err != nil {
		panic(err)
	}
	req := (&http.Request{Method: spec.method, URL: u, Header: http.Header{"X-Caller": {"yes"}},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: u.Host}).WithContext(ctx)
	switch spec.body {
	case bodyNoBody:
		req.Body = http.NoBody
	case bodyGetBody, bodyGetBodySlow, bodyGetBodyBreaks:
		req.Body = c.newBody()
		req.GetBody = func() (io.ReadCloser, error) { return c.newBody(), nil }
	case bodyGetBodyFails:
		req.Body = c.newBody()
		req.GetBody = func() (io.ReadCloser, error) { return nil, errGetBody }
	case bodyOpaque, bodySlow, bodyOpaqueBreaks:
		req.Body = c.newBody()
	case bodySeek, bodySeekSlow, bodySeekFails:
		req.Body = &seekBody{reqBody: c.newBody(), stuck: spec.body == bodySeekFails}
	case bodySharedSeek:
		// azcore's GetBody: the one stream, sought back to 0. Its Close
		// ends nothing, as azcore's nopCloser's does.
		body := &seekBody{reqBody: c.newBody()}
		body.nopClose = true
		req.Body = body
		req.GetBody = func() (io.ReadCloser, error) {
			if _, err := body.Seek(0, io.SeekStart); err != nil {
				return nil, err
			}
			return body, nil
		}
	case bodyStream:
		c.stream = newStreamBody(c.payload())
		req.Body = c.stream
	}
	if spec.body != bodyNone && spec.body != bodyNoBody && !spec.clUnknown {
		req.ContentLength = int64(spec.bodyLen + spec.clDelta)
	}
	if h := callerKeyHeaders[spec.callerKey]; h != "" {
		if spec.keyLower {
			h = strings.ToLower(h) // set directly, not canonical: the same header to net/http
		}
		req.Header[h] = []string{"caller-key-" + strconv.Itoa(spec.idx)}
	}
	if spec.nilHeader {
		req.Header = nil
	}
	return req
}
