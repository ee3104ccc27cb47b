package httpretrytest

import "github.com/seedhq/httpretry/internal/netfault"

// ConnReset returns a connection reset by the peer while the response was
// read: a *net.OpError wrapping syscall.ECONNRESET, as net/http's Transport
// reports it. httpretry classifies it as transient: the server may have
// processed the request, so only a replayable request is retried.
func ConnReset() error { return netfault.ConnReset() }

// DialRefused returns a refused connection: a *net.OpError with Op "dial"
// wrapping syscall.ECONNREFUSED. httpretry classifies it as not-processed:
// nothing was sent, so any request is retried, a POST without a key
// included.
func DialRefused() error { return netfault.DialRefused() }

// Timeout returns a read timeout: a net.Error whose Timeout method reports
// true, which also matches errors.Is(err, os.ErrDeadlineExceeded).
// httpretry classifies it as transient.
func Timeout() error { return netfault.Timeout() }
