package invariants

import (
	"bufio"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The fuzz targets feed hostile server input through TestInvariants'
// scenarios and checker: the fuzzer's values become the first answer of
// the first call of a scenario drawn from its seed, and every invariant is
// checked as for a random scenario. Where the model cannot read a value
// itself (a RateLimit field, a reset header), it leaves out the checks
// that need the wait it asks for; Retry-After is read with the public
// ParseRetryAfter, which FuzzParseRetryAfter checks on its own.

// FuzzHeaders is FuzzInvariantsHeaders: a status code and the values of the hint headers.
func FuzzHeaders(f *testing.F, opts Options) {
	f.Add(uint64(1), 503, "2", `"default";r=0;t=3`, "5", "true")
	f.Add(uint64(2), 429, "Wed, 21 Oct 2015 07:28:00 GMT", `;;=`, "-1", "false")
	f.Add(uint64(3), 101, "99999999999999999999", `"q";r=0;t=99999999999999`, "4294967297", " TRUE ")
	f.Add(uint64(4), -1, "", "", "", "")
	f.Add(uint64(5), 409, "0", `"a";r=0;t=1, "b";r=0;t=4`, "x", "maybe")
	f.Fuzz(func(t *testing.T, seed uint64, status int, retryAfter, rateLimit, reset, should string) {
		o := &outcome{status: status, err: -1, raw: true}
		add := func(name, value string, kind int) {
			if value != "" {
				o.headers = append(o.headers, hdr{name: name, value: value, kind: kind})
			}
		}
		add("Retry-After", retryAfter, hdrLit)
		add("RateLimit", rateLimit, hdrFuzz)
		add(resetHeader, reset, hdrFuzz)
		add(shouldHeader, should, hdrLit)
		fuzzScenario(t, seed, o, opts)
	})
}

// FuzzResponseHead is FuzzInvariantsResponseHead: a response's status line and header, as
// net/http's client parses them; what it cannot parse is the attempt's
// error.
func FuzzResponseHead(f *testing.F, opts Options) {
	f.Add(uint64(1), "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\r\n")
	f.Add(uint64(2), "HTTP/1.1 429 Too Many Requests\r\nRateLimit: \"default\";r=0;t=2\r\nRetry-After: 0\r\nRetry-After: 3600\r\n\r\n")
	f.Add(uint64(3), "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")
	f.Add(uint64(4), "HTTP/1.0 200\r\n\r\n")
	f.Add(uint64(5), "IS NOT HTTP\r\n\r\n")
	f.Add(uint64(6), "HTTP/1.1 999 Whatever\r\nX-Should-Retry: true\r\nX-RateLimit-Reset: 3\r\n\r\n")
	f.Fuzz(func(t *testing.T, seed uint64, head string) {
		o := &outcome{err: -1, raw: true}
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(head)), nil)
		if err != nil {
			o.err = errKindNamed("untyped")
		} else {
			resp.Body.Close()
			o.status = resp.StatusCode
			for _, name := range slices.Sorted(func(yield func(string) bool) {
				for k := range resp.Header {
					if !yield(k) {
						return
					}
				}
			}) {
				kind := hdrFuzz
				if name == "Retry-After" || name == shouldHeader {
					kind = hdrLit
				}
				for _, v := range resp.Header[name] {
					o.headers = append(o.headers, hdr{name: name, value: v, kind: kind})
				}
			}
		}
		fuzzScenario(t, seed, o, opts)
	})
}

// fuzzScenario plays the scenario of seed with o as the first answer to
// its first call, the hints o may carry read by the policy.
func fuzzScenario(t *testing.T, seed uint64, o *outcome, opts Options) {
	s := newScenario(seed, opts)
	s.base = baseScripted // the fuzzer's values reach the Transport as they are, not through a server's parser
	s.pol.should = true
	if s.pol.reset == 0 {
		s.pol.reset = 1
	}
	s.calls[0].script[0] = o
	s.fuzzed = true
	if vs := runScenario(t, s); len(vs) > 0 {
		t.Fatalf("seed %d with the fuzzer's answer %s:\n\t%s\n\tscenario: %s", seed, o, strings.Join(vs, "\n\t"), s.describe())
	}
}
