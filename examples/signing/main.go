// Signing shows where request signing goes: under httpretry, so that every
// attempt is signed when it is sent. A local server verifies an HMAC over
// the method, path, body, a timestamp and a one-time nonce, and rejects stale
// timestamps and replayed nonces; its first answer is a 503 with
// Retry-After: 1. It needs no network beyond 127.0.0.1.
//
//	go run ./examples/signing
//
// Signed under the retries, the retry carries a fresh signature and
// succeeds. Signed above them, the retry re-sends the first attempt's
// signature, a second old by then, and the server rejects it. The demo's
// server accepts timestamps up to 500 ms old so that the one-second wait
// makes the point; real services allow minutes, and real Retry-After waits
// are as long.
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/seedhq/httpretry"
)

var demoKey = []byte("shared-secret-for-the-demo-only")

const demoMaxAge = 500 * time.Millisecond

func main() {
	fmt.Println("1. Right: http.Client → httpretry.Transport → Signer → http.Transport")
	run(func() http.RoundTripper {
		return &httpretry.Transport{Base: &Signer{Key: demoKey}}
	})

	fmt.Println("\n2. Wrong: http.Client → Signer → httpretry.Transport → http.Transport")
	run(func() http.RoundTripper {
		return &Signer{Key: demoKey, Base: &httpretry.Transport{}}
	})
}

// run sends one signed report through the stack newStack builds, to a
// fresh server, and prints what the server decided about each attempt.
func run(newStack func() http.RoundTripper) {
	v := newVerifier(demoKey, demoMaxAge, time.Now, &flakyReports{retryAfter: "1"})
	srv := httptest.NewServer(v)
	defer srv.Close()

	client := &http.Client{Timeout: 30 * time.Second, Transport: newStack()}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/reports", strings.NewReader(`{"cpu":0.93}`))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", "report-2026-11-30-0001") // the report is stored once, however often it is sent
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	var first int64
	for i, vd := range v.seen() {
		ms, _ := strconv.ParseInt(vd.Timestamp, 10, 64)
		if i == 0 {
			first = ms
		}
		verdict := "accepted"
		if vd.Reject != "" {
			verdict = "rejected: " + vd.Reject
		}
		fmt.Printf("   attempt %d: signed at +%dms, nonce %s… -> %s, %d\n", i+1, ms-first, vd.Nonce[:8], verdict, vd.Status)
	}
	fmt.Printf("   => %s %s\n", resp.Status, strings.TrimSpace(string(b)))
}
