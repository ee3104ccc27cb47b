package httpretrytest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/seedhq/httpretry/internal/netfault"
)

// Script is an http.RoundTripper that plays scripted outcomes, one per
// request, in the order the requests arrive, and records every request it
// sees. Use it as the Base of an httpretry.Transport to test how a client
// behaves when its upstream fails in a given way:
//
//	upstream := httpretrytest.NewScript(
//		httpretrytest.Status(503),
//		httpretrytest.Fail(httpretrytest.ConnReset()),
//		httpretrytest.Respond(200, "ok"),
//	)
//	client := &http.Client{Transport: &httpretry.Transport{Base: upstream}}
//
// Past the end of its script, a Script repeats the last outcome: a test of
// "the upstream is down" scripts one 503, and the count of attempts, the
// thing under test, is checked with [CheckAttempts] rather than assumed by
// the script.
//
// Requests matched by On or OnPath follow their own script, with its own
// position; the others follow the one given to NewScript. A request that
// no script covers fails with an error that names it.
//
// A Script reads and closes each request body before it answers, so
// [Request].Body holds all of it; a body that fails to read makes RoundTrip
// return that failure. Response bodies are [Body] values that honour the
// request's context. All waits use the caller's clock, so a Script used
// inside a testing/synctest bubble runs on the bubble's fake clock.
//
// The zero Script has no outcomes: every request fails. A Script is safe
// for concurrent use; add routes before the first request.
type Script struct {
	// KeyHeader names the header recorded as [Request].Key. Empty means
	// [DefaultKeyHeader], "Idempotency-Key".
	KeyHeader string

	mu     sync.Mutex
	routes []*route
	dflt   route
	idle   int
	rec    recorder
}

type route struct {
	match    func(*http.Request) bool
	outcomes []Outcome
	next     int
}

// take returns the route's next outcome, repeating the last one.
func (r *route) take() (Outcome, bool) {
	if len(r.outcomes) == 0 {
		return Outcome{}, false
	}
	o := r.outcomes[min(r.next, len(r.outcomes)-1)]
	r.next++
	return o, true
}

// NewScript returns a Script that answers the requests no route matches
// with outcomes, in order, repeating the last one.
func NewScript(outcomes ...Outcome) *Script {
	return &Script{dflt: route{outcomes: outcomes}}
}

// On gives the requests for which match reports true a script of their
// own. Routes are tried in the order they were added. It returns s.
func (s *Script) On(match func(*http.Request) bool, outcomes ...Outcome) *Script {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes = append(s.routes, &route{match: match, outcomes: outcomes})
	return s
}

// OnPath gives the requests for path (exactly, as URL.Path) a script of
// their own. It returns s.
func (s *Script) OnPath(path string, outcomes ...Outcome) *Script {
	return s.On(func(r *http.Request) bool { return r.URL.Path == path }, outcomes...)
}

// Requests returns a copy of every request seen so far, in arrival order.
// The copies are its own: editing their URL, Header or Body changes
// nothing that a later Requests call or a Check function sees. Their
// ResponseBody is shared, its counts live.
func (s *Script) Requests() []Request { return s.rec.snapshot() }

// CloseIdleConnections counts the call, so that a test can check that a
// layer above forwards it (see IdleClosures). A Script has no connections.
func (s *Script) CloseIdleConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idle++
}

// IdleClosures reports how many times CloseIdleConnections was called.
func (s *Script) IdleClosures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle
}

// RoundTrip records req and answers it with the next outcome of its script.
func (s *Script) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		return nil, errNilURL(req)
	}
	e := s.rec.begin(req, s.KeyHeader)
	var body []byte
	if rc := s.rec.body(e, req.Body); rc != nil {
		var err error
		body, err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			err = fmt.Errorf("httpretrytest: reading the request body: %w", err)
			s.rec.answered(req.Context(), e, 0, nil, err)
			return nil, err
		}
	} else if req.Body != nil {
		req.Body.Close()
	}

	o, ok := s.take(req)
	if !ok {
		err := fmt.Errorf("httpretrytest: no outcome scripted for %s %s", e.Method, req.URL.Redacted())
		s.rec.answered(req.Context(), e, 0, nil, err)
		return nil, err
	}
	if err := netfault.Wait(req.Context(), o.delay); err != nil && !o.onCancel {
		s.rec.answered(req.Context(), e, 0, nil, err)
		return nil, err
	}

	switch {
	case o.err != nil:
		s.rec.answered(req.Context(), e, 0, nil, o.err)
		return nil, o.err
	case o.fn != nil:
		return s.call(e, req, body, o)
	}
	resp, b := o.response(req)
	s.rec.answered(req.Context(), e, resp.StatusCode, b, nil)
	return resp, nil
}

func (s *Script) take(req *http.Request) (Outcome, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.routes {
		if r.match(req) {
			return r.take()
		}
	}
	return s.dflt.take()
}

// call answers with a Func outcome, giving it the request with its body.
func (s *Script) call(e *Request, req *http.Request, body []byte, o Outcome) (*http.Response, error) {
	r := req
	if body != nil {
		r = req.WithContext(req.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := o.fn(r)
	if err != nil || resp == nil {
		s.rec.answered(req.Context(), e, 0, nil, err)
		return resp, err
	}
	var b *Body
	if resp.Body != nil {
		b = newBody(resp.Body, resp.ContentLength)
		b.closer = resp.Body.Close
		b.ctx = req.Context()
		o.configure(b)
		resp.Body = b
	}
	s.rec.answered(req.Context(), e, resp.StatusCode, b, nil)
	return resp, nil
}
