// Package replay gives each attempt of a call a request body of its own:
// the caller's GetBody, a Seek back to the start, or a copy of the body as
// Base read it, with every reader of a shared stream at its own position.
// See Replay.
package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Replay gives each attempt of a call a request body of its own, in the
// cheapest way the request allows:
//
//   - no body: nothing to give (no replay at all);
//   - one attempt only (no retry, no hedge): the caller's body itself,
//     with nothing kept;
//   - GetBody: the first attempt sends Body, each later one a copy from
//     GetBody;
//   - a Body that is an io.Seeker: read again from where it started, with
//     no copy and no size limit;
//   - any other body: sent at once, as Base reads it, while a copy of what
//     Base reads is kept, up to MaxReplayBytes, for the attempts after it.
//     A body that outgrows the copy cannot be sent again.
//
// Nothing is read ahead of Base: a streaming body (a pipe the caller
// writes to while it reads the response) works as it does without a
// Transport.
//
// Every reader of a body (an attempt's, or a copy from an attempt's
// GetBody, which a request signer in Base reads while the attempt's own
// body waits to be sent) keeps its own position. Reads of one underlying
// stream are serialised, and a reader that finds the stream moved by
// another seeks back to where it was. So readers never corrupt each
// other: net/http's write loop may still be sending an earlier attempt's
// body after RoundTrip returned (a server that answered 503 before reading
// it), and GetBody and Seek often rewind the very stream it reads —
// azcore's GetBody seeks one stream back to 0 and returns it.
//
// Before a retry, the earlier attempts' bodies are detached: once Base is
// no longer inside a Read of one (the replay waits for that, bounded by
// the context), it gives Base an error instead of reading on, so a write
// loop still sending it stops.
type Replay struct {
	mode    replayMode
	caller  io.ReadCloser                 // the caller's body
	getBody func() (io.ReadCloser, error) // the caller's GetBody
	rec     *recording                    // replayCopy: the copy as sent
	streams []*stream                     // replaySeek, replayGetBody: the streams read, the caller's first
	// streamIO serialises, in GetBody mode, every read of a stream and
	// every call of GetBody, which may seek a stream a reader is reading.
	streamIO ioLock
	spare    io.ReadCloser // a copy from GetBody, taken at the start, for the first hedge
	shared   atomic.Bool   // GetBody returns one stream that cannot seek: attempts cannot read at once

	mu     sync.Mutex
	sent   []*sentBody // the bodies given out and not yet detached
	broken error       // why the body cannot be sent again

	clock atomic.Int64 // orders the making and reading of readers
	once  *onceBody    // replayOnce: the caller's body, as given to Base
}

type replayMode uint8

const (
	replayOnce    replayMode = iota // sent once, never again
	replayGetBody                   // Body, then GetBody
	replaySeek                      // one seekable stream, read from its start by each attempt
	replayCopy                      // a copy of what Base read
)

// rewindWait bounds how long a retry waits for Base to leave a Read of an
// earlier attempt's body that is a stream without a copy of its rest, when
// the context allows longer: a stream whose writer waits for the response
// (a full-duplex exchange) would otherwise hold the retry until the
// deadline. Such a body is not sent again.
const rewindWait = time.Second

var (
	// ErrBody is what every error of a body that cannot be had wraps;
	// the root package exports it as ErrRequestBody.
	ErrBody = errors.New("httpretry: request body")
	// errDetached is what Base reads from an attempt's body once a later
	// attempt's was given out.
	errDetached = errors.New("httpretry: the request body was rewound for another attempt")
	// errBodyBusy says that a body could not be rewound: Base was still
	// inside a Read of the caller's stream.
	errBodyBusy = errors.New("the previous attempt was still reading the body's stream")
	// ErrBusy says that a body could not be had for an attempt before its
	// context ended (or, for a hedge, at once): Base was inside a Read of
	// the caller's stream. A hedge may try again later.
	ErrBusy = fmt.Errorf("%w: %w", ErrBody, errBodyBusy)
	// errInterrupted says that Base closed a body while it read the
	// caller's stream, which was closed to end the read.
	errInterrupted = errors.New("the request body was closed while it was being read")
	// errTooLarge says that the body outgrew the copy kept for replay.
	errTooLarge = errors.New("the body is larger than MaxReplayBytes, and not replayable without GetBody or Seek")
	// errSharedBody says that GetBody returned a stream another attempt
	// may be reading, and that cannot seek.
	errSharedBody = errors.New("GetBody returns one stream that cannot seek: no hedge can read it alongside another attempt")
)

// New decides how req's body is given to the attempts of a call that
// may make several (multi) and may hedge (hedge), keeping at most limit
// bytes of a copy (limit < 0: none). A request without a body needs no
// replay: it returns nil, and a nil *Replay gives every attempt the
// request's own Body.
func New(req *http.Request, limit int64, multi, hedge bool) *Replay {
	body := req.Body
	if body == nil || body == http.NoBody {
		return nil
	}
	r := &Replay{caller: body}
	r.init(req, limit, multi, hedge)
	return r
}

func (r *Replay) init(req *http.Request, limit int64, multi, hedge bool) {
	body := r.caller
	switch {
	case !multi:
		r.mode = replayOnce
		return
	case req.GetBody != nil:
		r.mode, r.getBody = replayGetBody, req.GetBody
		r.streamIO = newIOLock()
		r.streams = []*stream{newStream(body, r.streamIO, true)}
		if hedge {
			r.probe()
		}
		return
	}
	if _, ok := body.(io.Seeker); ok {
		if st := newStream(body, nil, false); st.seeker != nil {
			r.mode, r.streams = replaySeek, []*stream{st}
			return
		}
	}
	if limit < 0 || req.ContentLength > limit {
		r.mode, r.broken = replayOnce, errTooLarge
		return
	}
	r.mode, r.rec = replayCopy, newRecording(body, limit, req.ContentLength)
}

// probe tells whether GetBody's copies can be read alongside the caller's
// Body, as a hedge reads them: a GetBody that returns Body itself rewinds
// one stream, which works only if it can seek. It keeps the copy for the
// first hedge.
func (r *Replay) probe() {
	rc, err := r.callGetBody() // no attempt has a body yet: nothing reads
	if err != nil {
		r.shared.Store(true) // a hedge will find out again; no hedging meanwhile
		return
	}
	r.spare = rc
}

// Replayable reports whether a retry can get a body now.
func (r *Replay) Replayable() bool {
	if r == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.replayableLocked()
}

func (r *Replay) replayableLocked() bool {
	switch r.mode {
	case replayOnce:
		return false
	case replayCopy:
		return r.broken == nil && r.rec.replayable()
	case replaySeek:
		return r.broken == nil && !r.streams[0].interrupted()
	}
	return r.broken == nil
}

// Hedgeable reports whether a hedge could get a body now, while the
// attempt it backs up may still be reading its own.
func (r *Replay) Hedgeable() bool {
	return r == nil || r.Replayable() && !r.shared.Load()
}

// First returns the first attempt's body.
func (r *Replay) First() io.ReadCloser {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.mode {
	case replayOnce:
		r.once = &onceBody{ReadCloser: r.caller}
		return r.once
	case replayCopy:
		return r.track(r.rec.reader())
	}
	return r.track(r.streams[0].reader())
}

// onceBody is the caller's body, sent once: closed at most once, by Base
// or by Abandon.
type onceBody struct {
	io.ReadCloser
	closed atomic.Bool
}

func (b *onceBody) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.ReadCloser.Close()
}

// Abandon ends body, an attempt's, whose attempt ended without Base
// returning (it panicked): Base will not close it, so the replay stops
// counting it as read, and a body sent once is closed.
func (r *Replay) Abandon(body io.ReadCloser) {
	switch b := body.(type) {
	case *sentBody:
		b.retire()
	case *onceBody:
		b.Close()
	}
}

// GetBodyFor returns the GetBody of an attempt's request: a copy of the
// body from its start, read alongside the attempt's own. net/http calls it
// to send the request again on another connection; a request signer in
// Base calls it to hash the body before the attempt is sent.
// A copy waits for a Read of the caller's stream in progress at most until
// ctx, the attempt's context, ends.
func (r *Replay) GetBodyFor(ctx context.Context, caller func() (io.ReadCloser, error)) func() (io.ReadCloser, error) {
	switch {
	case r.mode == replayOnce && r.broken == nil:
		return caller
	case r.mode == replayOnce:
		return nil
	}
	return func() (io.ReadCloser, error) { return r.copyBody(ctx) }
}

// copyBody is the GetBody of an attempt's request whose context is ctx.
func (r *Replay) copyBody(ctx context.Context) (io.ReadCloser, error) {
	if err := r.replayableErr(); err != nil {
		return nil, err
	}
	return r.readerFor(ctx)
}

// readerFor returns a new reader, waiting for a Read of the caller's
// stream in progress until ctx ends.
func (r *Replay) readerFor(ctx context.Context) (io.ReadCloser, error) {
	for {
		rc, err := r.newReader()
		if err != ErrBusy { // ErrBusy itself, not a GetBody's error that wraps one
			return rc, err
		}
		if err := r.waitStream(ctx); err != nil {
			return nil, err
		}
	}
}

// replayableErr returns why the body cannot be had again, or nil.
func (r *Replay) replayableErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.replayableLocked() {
		return r.brokenErr()
	}
	return nil
}

// waitStream waits, without holding r.mu, until no Read of the caller's
// stream is in progress, or ctx ends.
func (r *Replay) waitStream(ctx context.Context) error {
	l := r.streamIO
	if r.mode == replaySeek {
		l = r.streams[0].io
	}
	if err := l.lockCtx(ctx); err != nil {
		return err
	}
	l.Unlock()
	return nil
}

// Next returns a body for another attempt: a retry (hedge false), for
// which the bodies given out so far are detached first, or a hedge, which
// reads alongside them and does not wait for a Read of the stream (its
// round goes on). On error the error wraps ErrBody.
func (r *Replay) Next(ctx context.Context, hedge bool) (io.ReadCloser, error) {
	if err := r.prepare(ctx, hedge); err != nil {
		return nil, err
	}
	if hedge {
		return r.newReader()
	}
	return r.readerFor(ctx)
}

// prepare checks that another attempt can have the body and, for a retry,
// detaches the bodies given out so far.
func (r *Replay) prepare(ctx context.Context, hedge bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	shared := r.shared.Load()
	if !r.replayableLocked() || hedge && shared {
		if shared && r.broken == nil {
			return fmt.Errorf("%w: %w", ErrBody, errSharedBody)
		}
		return r.brokenErr()
	}
	if hedge {
		return nil
	}
	for _, b := range r.sent {
		err := b.detach(ctx, rewindWait)
		switch {
		case err == nil:
		case r.mode == replayCopy || shared:
			// Base is still inside a Read of a stream that the retry
			// could only read after it, or not alongside it.
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %w", ErrBusy, context.Cause(ctx))
			}
			r.broken = err
			return r.brokenErr()
		default:
			// Each reader keeps its own position: the retry goes ahead,
			// and Base's next Read of the old body fails, so that its
			// write loop does not hold the stream from the retry.
			b.retireLater()
		}
	}
	clear(r.sent)
	r.sent = r.sent[:0]
	return nil
}

// newReader returns a reader of the body from its start, tracked as given
// out. Where a Read of the caller's stream is in progress, it fails with
// ErrBusy at once (see waitStream). The caller's GetBody runs holding only
// the stream lock, never r.mu, so that a slow or panicking GetBody holds
// up no one else.
func (r *Replay) newReader() (io.ReadCloser, error) {
	r.mu.Lock()
	switch r.mode {
	case replayCopy:
		defer r.mu.Unlock()
		return r.track(r.rec.reader()), nil
	case replaySeek:
		defer r.mu.Unlock()
		b, err := r.streams[0].rewoundReader()
		if err == ErrBusy {
			return nil, err
		}
		if err != nil {
			r.broken = fmt.Errorf("seek: %w", err)
			return nil, r.brokenErr()
		}
		return r.track(b), nil
	}
	rc := r.spare
	r.spare = nil
	r.mu.Unlock()
	if rc == nil {
		var err error
		if rc, err = r.callGetBody(); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.track(rc.(*sentBody)), nil
}

// callGetBody calls the caller's GetBody with every read of a stream held
// off, since it may seek one, and returns a reader of the stream it
// returned: a new one, or one already read, which is then shared. It does
// not wait for a Read of a stream: one in progress makes it fail with
// ErrBusy.
func (r *Replay) callGetBody() (io.ReadCloser, error) {
	if !r.streamIO.tryLock() {
		return nil, ErrBusy
	}
	defer r.streamIO.Unlock()
	rc, err := r.getBody()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: GetBody: %w", ErrBody, err)
	case rc == nil:
		return nil, fmt.Errorf("%w: GetBody returned a nil body", ErrBody)
	}
	i := slices.IndexFunc(r.streams, func(st *stream) bool { return sameBody(st.rc, rc) })
	if i < 0 {
		st := newStreamLocked(rc, r.streamIO, true)
		r.streams = append(r.streams, st)
		return st.readerLocked(), nil
	}
	st := r.streams[i]
	if st.seeker == nil {
		r.shared.Store(true)
	}
	st.rewound() // GetBody may have moved it; where to is read anew
	return st.readerLocked(), nil
}

// sameBody reports whether a and b are the same body, without panicking
// on a body type that is not comparable.
func sameBody(a, b io.ReadCloser) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

func (r *Replay) track(b *sentBody) *sentBody {
	b.clock = &r.clock
	b.made = r.clock.Add(1)
	r.sent = append(r.sent, b)
	return b
}

func (r *Replay) brokenErr() error {
	err := r.broken
	if err == nil && r.mode == replayCopy {
		err = r.rec.why()
	}
	if err == nil {
		err = errTooLarge
	}
	if errors.Is(err, ErrBody) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrBody, err)
}

// Failed returns the error the body itself gave Base while it read body,
// an attempt's, if any: a caller's body that broke half-way, a
// ContentLength it does not match, a copy that ran out — rather than the
// connection.
func (r *Replay) Failed(body io.ReadCloser) error {
	if r == nil {
		return nil
	}
	if b, ok := body.(*sentBody); ok {
		if err := b.failure(); err != nil {
			return fmt.Errorf("%w: %w", ErrBody, err)
		}
	}
	return nil
}

// End is called once, when the call is over: the caller's stream closes
// once no reader of it is open, and a spare copy is closed.
func (r *Replay) End() {
	if r == nil {
		return
	}
	r.mu.Lock()
	spare := r.spare
	r.spare = nil
	r.retireLeftovers()
	r.mu.Unlock()
	if spare != nil {
		spare.Close()
	}
	switch r.mode {
	case replaySeek:
		r.streams[0].end()
	case replayCopy:
		r.rec.end()
	}
}
