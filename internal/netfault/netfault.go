// Package netfault builds the failures a network produces, as the standard
// library reports them, for httpretrytest and chaos to share. A failure
// built here is classified by httpretry exactly as the real one would be,
// because it has the same types: *net.OpError wrapping *os.SyscallError
// wrapping a syscall.Errno, or os.ErrDeadlineExceeded.
package netfault

import (
	"context"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// ConnReset is a connection reset by the peer while the response was read,
// as net/http's Transport reports it. The server may have processed the
// request.
func ConnReset() error {
	return &net.OpError{Op: "read", Net: "tcp",
		Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}
}

// DialRefused is a refused connection: nothing was sent.
func DialRefused() error {
	return &net.OpError{Op: "dial", Net: "tcp",
		Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
}

// Timeout is a read deadline passing: a net.Error whose Timeout method
// reports true, and errors.Is(err, os.ErrDeadlineExceeded).
func Timeout() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

// Wait waits for d on the clock of the calling goroutine (the fake one
// inside a testing/synctest bubble) or until ctx ends, and then returns the
// context's cause, as net/http's Transport does for a cancelled request.
// Unlike backoff.Wait, it starts a wait that cannot end before the
// context's deadline: a slow network does not know the caller's deadline,
// and the caller sees the deadline pass.
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Truncate passes the first n bytes of rc, then fails every Read with err
// (io.ErrUnexpectedEOF when err is nil), as a body whose connection dropped
// does. Closing it closes rc.
func Truncate(rc io.ReadCloser, n int64, err error) io.ReadCloser {
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return &truncated{rc: rc, left: n, err: err}
}

type truncated struct {
	rc   io.ReadCloser
	left int64
	err  error
}

func (t *truncated) Read(p []byte) (int, error) {
	if t.left <= 0 {
		return 0, t.err
	}
	if int64(len(p)) > t.left {
		p = p[:t.left]
	}
	n, err := t.rc.Read(p)
	t.left -= int64(n)
	return n, err // an io.EOF here means the body ended before the cut
}

func (t *truncated) Close() error { return t.rc.Close() }
