// Package signal names what one attempt's outcome says about its host's
// load, as the overload controls (adaptive throttling, the concurrency
// limit) count it. The Transport decides the signal; the controls only
// count it.
package signal

// Signal is what one attempt's outcome says about the host's load, as the
// throttle and the concurrency limiter count it.
type Signal uint8

const (
	// None: the outcome says nothing about load and is not counted:
	// the caller cancelled, no server took part (DNS, a refused
	// connection), or a local control refused the attempt.
	None Signal = iota
	// Accepted: the host took the request and answered it in time,
	// whatever the answer (2xx–4xx but 429, and 500, 501, 505: a server
	// that fails a request it processed is the retry budget's business).
	Accepted
	// Overloaded: the host, or a gateway before it, turned the
	// request away (429, 502, 503, HTTP/2 REFUSED_STREAM, a connection
	// reset or closed before the response) or did not answer it in time
	// (an attempt or network timeout, the caller's deadline, a 504).
	Overloaded
)
