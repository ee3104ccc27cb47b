package httpretrytest

import (
	"net/http"
	"strconv"
	"time"
)

// Outcome is one scripted answer of a [Script]: a response with a status,
// headers and a body, or an error, each optionally late, slow or broken.
// Build one with [Status], [Respond], [RetryAfter], [Fail] or [Func], then
// refine it with its methods, each of which returns a modified copy:
//
//	httpretrytest.Status(429).Header("RateLimit", `"default";r=0;t=30`)
//	httpretrytest.Respond(200, "ok").Slow(1, 50*time.Millisecond)
//	httpretrytest.Fail(httpretrytest.ConnReset()).After(2 * time.Second)
//
// The zero Outcome is a 200 response with an empty body.
type Outcome struct {
	status    int
	header    http.Header
	body      string
	filler    int64 // > 0: the body is that many filler bytes instead
	err       error
	fn        func(*http.Request) (*http.Response, error)
	delay     time.Duration
	onCancel  bool
	chunk     int
	pause     time.Duration
	fail      bool
	failAfter int64
	failErr   error
}

// Status is a response with status code and its status text as body.
func Status(code int) Outcome {
	return Outcome{status: code, body: http.StatusText(code)}
}

// Respond is a response with status code and body.
func Respond(code int, body string) Outcome {
	return Outcome{status: code, body: body}
}

// RetryAfter is a response with status code and a Retry-After header of
// value: delay-seconds ("2") or an HTTP-date.
func RetryAfter(code int, value string) Outcome {
	return Status(code).Header("Retry-After", value)
}

// Fail is an error instead of a response: RoundTrip returns err. Use
// [ConnReset], [DialRefused] or [Timeout] for the failures of a network,
// which httpretry classifies as it would the real ones.
func Fail(err error) Outcome {
	return Outcome{err: err}
}

// Func answers with whatever f returns, for behaviour no other Outcome
// has. The Script still records the request, and f receives it with its
// body intact; a non-nil response body is wrapped in a [Body] so that its
// reads and closes are counted.
func Func(f func(*http.Request) (*http.Response, error)) Outcome {
	return Outcome{fn: f}
}

// Header returns o with value added to the response header key.
func (o Outcome) Header(key, value string) Outcome {
	o.header = o.header.Clone()
	if o.header == nil {
		o.header = http.Header{}
	}
	o.header.Add(key, value)
	return o
}

// Body returns o with body as the response body.
func (o Outcome) Body(body string) Outcome {
	o.body, o.filler = body, 0
	return o
}

// Filler returns o with a response body of n bytes of 'x' that are never
// held in memory (see [NewFillerBody]).
func (o Outcome) Filler(n int64) Outcome {
	o.body, o.filler = "", n
	return o
}

// After returns o answered only after d, on the clock of the caller (the
// fake one inside a testing/synctest bubble). If the request's context ends
// first, RoundTrip returns the context's cause instead, as net/http's
// Transport does, unless RespondOnCancel is set.
func (o Outcome) After(d time.Duration) Outcome {
	o.delay = d
	return o
}

// RespondOnCancel returns o answered at once when the request's context
// ends during After's delay, instead of with the context's error: a Base
// that hands back a response even for a cancelled request, which whoever
// receives it must close.
func (o Outcome) RespondOnCancel() Outcome {
	o.onCancel = true
	return o
}

// Slow returns o with a response body that delivers at most chunk bytes
// per Read, each after a pause (see [Body.Slow]).
func (o Outcome) Slow(chunk int, pause time.Duration) Outcome {
	o.chunk, o.pause = chunk, pause
	return o
}

// FailAfter returns o with a response body that fails with err after n
// bytes (see [Body.FailAfter]). The response's ContentLength stays the full
// length, so the body looks cut short.
func (o Outcome) FailAfter(n int64, err error) Outcome {
	o.fail, o.failAfter, o.failErr = true, n, err
	return o
}

// response builds the response of a non-error, non-Func Outcome to req.
func (o Outcome) response(req *http.Request) (*http.Response, *Body) {
	var b *Body
	if o.filler > 0 {
		b = NewFillerBody(o.filler)
	} else {
		b = NewBody(o.body)
	}
	o.configure(b)
	b.ctx = req.Context()
	code := o.status
	if code == 0 {
		code = http.StatusOK
	}
	h := o.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{
		Status:        statusLine(code),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          b,
		ContentLength: b.size,
		Request:       req,
	}, b
}

func (o Outcome) configure(b *Body) {
	if o.chunk > 0 || o.pause > 0 {
		b.Slow(o.chunk, o.pause)
	}
	if o.fail {
		b.FailAfter(o.failAfter, o.failErr)
	}
}

// statusLine is the Status field net/http fills in: "503 Service Unavailable".
func statusLine(code int) string {
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	return strconv.Itoa(code) + " " + text
}
