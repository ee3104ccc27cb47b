package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/seedhq/httpretry/internal/signal"

	"github.com/sony/gobreaker/v2"
)

// h2StreamError has the shape of net/http's HTTP/2 stream error, which
// refusedStream recognises.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
}

func (e h2StreamError) Error() string { return fmt.Sprintf("stream %d: code %d", e.StreamID, e.Code) }

func TestLoadSignal(t *testing.T) {
	t.Parallel()
	resp := func(code int) *http.Response { return &http.Response{StatusCode: code} }
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	cases := []struct {
		name string
		resp *http.Response
		err  error
		want signal.Signal
	}{
		{"200", resp(200), nil, signal.Accepted},
		{"304", resp(304), nil, signal.Accepted},
		{"404", resp(404), nil, signal.Accepted},
		{"408: the server waited for the client", resp(408), nil, signal.Accepted},
		{"500: processed, then failed", resp(500), nil, signal.Accepted},
		{"501", resp(501), nil, signal.Accepted},
		{"429", resp(429), nil, signal.Overloaded},
		{"502", resp(502), nil, signal.Overloaded},
		{"503", resp(503), nil, signal.Overloaded},
		{"504", resp(504), nil, signal.Overloaded},
		{"attempt timeout", nil, fmt.Errorf("%w (%v)", ErrAttemptTimeout, context.Canceled), signal.Overloaded},
		{"dial timeout", nil, dialTimeout, signal.Overloaded},
		{"REFUSED_STREAM", nil, h2StreamError{StreamID: 3, Code: 7}, signal.Overloaded},
		{"reset", nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, signal.Overloaded},
		{"EOF before the response", nil, io.ErrUnexpectedEOF, signal.Overloaded},
		{"connection refused: no server took part", nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, signal.None},
		{"DNS", nil, &net.DNSError{Err: "no such host", IsNotFound: true}, signal.None},
		{"caller cancelled", nil, context.Canceled, signal.None},
		{"throttled here", nil, fmt.Errorf("%w for h", ErrThrottled), signal.None},
		{"limited here", nil, ErrConcurrencyLimit, signal.None},
		{"paced here", nil, ErrRateLimited, signal.None},
		{"breaker here", nil, fmt.Errorf("%w for h", ErrCircuitOpen), signal.None},
		{"a breaker below", nil, gobreaker.ErrOpenState, signal.None},
		{"neither", nil, nil, signal.None},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := loadSignal(context.Background(), tc.resp, tc.err); got != tc.want {
				t.Errorf("loadSignal = %d, want %d", got, tc.want)
			}
		})
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if got := loadSignal(cancelled, nil, context.Canceled); got != signal.None {
		t.Errorf("cancelled by the caller: %d, want signalNone", got)
	}
	if got := loadSignal(cancelled, resp(503), nil); got != signal.Overloaded {
		t.Errorf("a 503 that came before the caller cancelled: %d, want signalOverloaded", got)
	}
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if got := loadSignal(expired, nil, context.DeadlineExceeded); got != signal.Overloaded {
		t.Errorf("past the caller's deadline: %d, want signalOverloaded", got)
	}
	if got := loadSignal(expired, nil, ErrThrottled); got != signal.None {
		t.Errorf("refused here, past the deadline: %d, want signalNone", got)
	}
}

func TestOverloadErrorsText(t *testing.T) {
	t.Parallel()
	for _, err := range []error{ErrThrottled, ErrConcurrencyLimit, ErrRateLimited} {
		if !refusedLocally(fmt.Errorf("wrapped: %w", err)) {
			t.Errorf("%v is not recognised as a local refusal", err)
		}
		if s := err.Error(); len(s) < 12 || s[:11] != "httpretry: " {
			t.Errorf("%q lacks the package prefix", s)
		}
	}
	if refusedLocally(errors.New("httpretry: throttled")) {
		t.Error("text alone must not count: decisions use errors.Is")
	}
}

// TestH2ErrorShapeOfThisGo fails when net/http's bundled HTTP/2 stream
// error changes shape: a real HTTP/2 server resets the stream (a handler
// aborted before its header), and the error net/http's client returns
// must be recognised by h2Error as a stream error with INTERNAL_ERROR (2).
// h2Error's doc names the Go version it was checked against.
func TestH2ErrorShapeOfThisGo(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := client.Transport.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("an aborted HTTP/2 handler: status %d, want a stream error", resp.StatusCode)
	}
	if !h2Error(err, 2) || !h2Error(err, -1) {
		t.Fatalf("%s: net/http's HTTP/2 stream error (%T: %v) is no longer recognised by its shape; update h2Error", runtime.Version(), err, err)
	}
	if h2Error(err, 7) {
		t.Fatalf("%T recognised as REFUSED_STREAM (7), but its code is INTERNAL_ERROR (2)", err)
	}
}
