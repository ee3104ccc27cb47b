package chaos

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seedhq/httpretry/internal/netfault"
)

// Fault handles a request that a rule's draw struck. It may answer
// req itself, fail it, or pass it (or a request derived from it) to next,
// the rest of the chain, and alter what comes back. Like any RoundTripper,
// it must close req.Body when it does not pass req on, and must return a
// response or an error, not both.
//
// The Faults of this package say which of the two they do: the
// upstream never sees a request that Status, RetryAfter, Respond, Refuse or
// Timeout answers; it does see, and may act on, one that Latency, Reset or
// Truncate passes on.
type Fault func(req *http.Request, next http.RoundTripper) (*http.Response, error)

// Status answers with status code and its status text as the body, as a
// proxy or gateway in front of the upstream would (503, 502, 504, 429).
func Status(code int) Fault {
	return Respond(code, nil, http.StatusText(code))
}

// RetryAfter answers with status code and a Retry-After header asking for
// d, rounded up to whole seconds: a 429 or 503 from a server that says when
// to come back.
func RetryAfter(code int, d time.Duration) Fault {
	secs := (d + time.Second - 1) / time.Second
	return Respond(code, http.Header{"Retry-After": {strconv.FormatInt(int64(secs), 10)}}, http.StatusText(code))
}

// Respond answers with status code, a copy of header, and body.
func Respond(code int, header http.Header, body string) Fault {
	return func(req *http.Request, _ http.RoundTripper) (*http.Response, error) {
		closeBody(req)
		h := header.Clone()
		if h == nil {
			h = http.Header{}
		}
		return &http.Response{
			Status:        strconv.Itoa(code) + " " + http.StatusText(code),
			StatusCode:    code,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        h,
			Body:          io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)),
			Request:       req,
		}, nil
	}
}

// Latency waits d, then passes the request on. The wait runs on the
// caller's clock and ends early if the request's context ends, with the
// context's cause; the request is then not passed on.
func Latency(d time.Duration) Fault {
	return func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		if err := netfault.Wait(req.Context(), d); err != nil {
			closeBody(req)
			return nil, err
		}
		return next.RoundTrip(req)
	}
}

// Reset passes the request on, then throws the response away and fails
// with a connection reset by the peer (a *net.OpError wrapping
// syscall.ECONNRESET): the upstream processed the request, but the caller
// never learns the outcome. That is the failure idempotency keys exist
// for: a retry must not apply the request twice.
func Reset() Fault {
	return func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		if resp.Body != nil {
			resp.Body.Close()
		}
		return nil, netfault.ConnReset()
	}
}

// Refuse fails with a refused connection (a *net.OpError with Op "dial"
// wrapping syscall.ECONNREFUSED) without passing the request on: nothing
// was sent, so any request may be retried.
func Refuse() Fault {
	return func(req *http.Request, _ http.RoundTripper) (*http.Response, error) {
		closeBody(req)
		return nil, netfault.DialRefused()
	}
}

// Timeout waits d, then fails with a read timeout (a net.Error whose
// Timeout method reports true) without passing the request on: an upstream
// that never answered. If the request's context ends first, it fails with
// the context's cause.
func Timeout(d time.Duration) Fault {
	return func(req *http.Request, _ http.RoundTripper) (*http.Response, error) {
		closeBody(req)
		if err := netfault.Wait(req.Context(), d); err != nil {
			return nil, err
		}
		return nil, netfault.Timeout()
	}
}

// Truncate passes the request on and cuts the response body after n
// bytes: reading past them fails with io.ErrUnexpectedEOF, as when the
// connection drops mid-body. The status and headers arrive intact, so the
// response looks like a success until its body is read.
func Truncate(n int64) Fault {
	return func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err != nil || resp.Body == nil {
			return resp, err
		}
		resp.Body = netfault.Truncate(resp.Body, n, nil)
		return resp, nil
	}
}

// Chain applies faults in order to the same request: each passes the
// request on to the next, the last to the rest of the Transport's chain.
// Chain(Latency(time.Second), Status(503)) is a 503 that takes a second.
func Chain(faults ...Fault) Fault {
	return func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		return chained(faults, next).RoundTrip(req)
	}
}

func chained(faults []Fault, next http.RoundTripper) http.RoundTripper {
	if len(faults) == 0 {
		return next
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return faults[0](req, chained(faults[1:], next))
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
