package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

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
		want signal
	}{
		{"200", resp(200), nil, signalAccepted},
		{"304", resp(304), nil, signalAccepted},
		{"404", resp(404), nil, signalAccepted},
		{"408: the server waited for the client", resp(408), nil, signalAccepted},
		{"500: processed, then failed", resp(500), nil, signalAccepted},
		{"501", resp(501), nil, signalAccepted},
		{"429", resp(429), nil, signalOverloaded},
		{"502", resp(502), nil, signalOverloaded},
		{"503", resp(503), nil, signalOverloaded},
		{"504", resp(504), nil, signalOverloaded},
		{"attempt timeout", nil, fmt.Errorf("%w (%v)", ErrAttemptTimeout, context.Canceled), signalOverloaded},
		{"dial timeout", nil, dialTimeout, signalOverloaded},
		{"REFUSED_STREAM", nil, h2StreamError{StreamID: 3, Code: 7}, signalOverloaded},
		{"reset", nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, signalOverloaded},
		{"EOF before the response", nil, io.ErrUnexpectedEOF, signalOverloaded},
		{"connection refused: no server took part", nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, signalNone},
		{"DNS", nil, &net.DNSError{Err: "no such host", IsNotFound: true}, signalNone},
		{"caller cancelled", nil, context.Canceled, signalNone},
		{"throttled here", nil, fmt.Errorf("%w for h", ErrThrottled), signalNone},
		{"limited here", nil, ErrConcurrencyLimit, signalNone},
		{"paced here", nil, ErrRateLimited, signalNone},
		{"breaker here", nil, fmt.Errorf("%w for h", ErrCircuitOpen), signalNone},
		{"a breaker below", nil, gobreaker.ErrOpenState, signalNone},
		{"neither", nil, nil, signalNone},
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
	if got := loadSignal(cancelled, nil, context.Canceled); got != signalNone {
		t.Errorf("cancelled by the caller: %d, want signalNone", got)
	}
	if got := loadSignal(cancelled, resp(503), nil); got != signalOverloaded {
		t.Errorf("a 503 that came before the caller cancelled: %d, want signalOverloaded", got)
	}
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if got := loadSignal(expired, nil, context.DeadlineExceeded); got != signalOverloaded {
		t.Errorf("past the caller's deadline: %d, want signalOverloaded", got)
	}
	if got := loadSignal(expired, nil, ErrThrottled); got != signalNone {
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
