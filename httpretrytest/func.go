package httpretrytest

import "net/http"

// RoundTripFunc adapts a function to http.RoundTripper, for a Base whose
// behaviour a test writes inline. A nil RoundTripFunc panics when called.
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f(req).
func (f RoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
