package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// Uploads whose retries replay one shared stream, as cloud SDKs hand them to
// net/http. The server answers some attempts 503 before reading a byte of
// the body, so net/http's write loop is still reading the attempt's body
// when its response arrives and httpretry decides to retry; every other
// attempt is read in full and checked against the digest and length the
// client announced. A retry that rewinds the stream while the previous
// attempt's write loop still reads it sends a body with holes in it.

const (
	uploadSize    = 4 << 20
	uploadWorkers = 4

	uploadAttempts = 4 // the Transport's MaxAttempts; the last is never answered early
	attemptHeader  = "X-Attempt"
	digestHeader   = "X-Upload-Sha256"
	sizeHeader     = "X-Upload-Size"
	uploadIDHeader = "X-Upload-Id"
)

// uploadSink is the server. It answers about one attempt in three 503
// before reading a byte of its body, chosen by a hash of the upload's id and
// the attempt's number (httpretry's AttemptHeader), so the same attempts are
// refused on every run; it never refuses the last attempt, so an upload
// whose bodies arrive intact always succeeds. Half the refusals leave the
// body unread, and Go's server closes the connection; the other half then
// read the body to its end and throw it away, keeping the connection, as
// nginx and Node's server (Azurite's) do. It reads every other attempt's
// body in full: intact, it answers 200; otherwise 400, which httpretry does
// not retry.
type uploadSink struct {
	early  atomic.Int64 // answered 503 before the body was read
	intact atomic.Int64 // read in full, length and digest right

	// The attempts that were read and did not arrive intact.
	readErrs    atomic.Int64 // the body's read failed: cut short, or the client gave up on it
	wrongLength atomic.Int64 // read to its end, but not the announced length
	wrongDigest atomic.Int64 // the announced length, other bytes
}

func (s *uploadSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	attempt, _ := strconv.Atoi(r.Header.Get(attemptHeader))
	switch answerEarly(r.Header.Get(uploadIDHeader), attempt) {
	case leaveUnread:
		s.early.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case discardAfter:
		s.early.Add(1)
		rc := http.NewResponseController(w)
		rc.EnableFullDuplex() // HTTP/1.1; HTTP/2 always is
		w.Header().Set("Content-Length", strconv.Itoa(len(busy)))
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, busy)
		rc.Flush()
		io.Copy(io.Discard, r.Body)
		return
	}
	h := sha256.New()
	n, err := io.Copy(h, r.Body)
	switch {
	case err != nil:
		s.readErrs.Add(1)
	case n != r.ContentLength || strconv.FormatInt(n, 10) != r.Header.Get(sizeHeader):
		s.wrongLength.Add(1)
	case hex.EncodeToString(h.Sum(nil)) != r.Header.Get(digestHeader):
		s.wrongDigest.Add(1)
	default:
		s.intact.Add(1)
		w.WriteHeader(http.StatusOK)
		return
	}
	http.Error(w, "body not as announced", http.StatusBadRequest)
}

func (s *uploadSink) corrupt() int64 {
	return s.readErrs.Load() + s.wrongLength.Load() + s.wrongDigest.Load()
}

const busy = "server busy\n"

// How the server answers an attempt.
type earlyAnswer int

const (
	readIt       earlyAnswer = iota // not early: read the body, check it
	leaveUnread                     // 503 and return, the body unread
	discardAfter                    // 503 sent, then the body read and thrown away
)

// answerEarly says how the server answers an attempt of an upload.
func answerEarly(id string, attempt int) earlyAnswer {
	if attempt < 1 || attempt >= uploadAttempts {
		return readIt
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", id, attempt)
	switch n := h.Sum32(); {
	case n%3 != 0:
		return readIt
	case n/3%2 == 0:
		return leaveUnread
	default:
		return discardAfter
	}
}

// nopSeekCloser is a ReadSeekCloser whose Close does nothing, as azcore's
// streaming.NopCloser, which callers wrap their payload in.
type nopSeekCloser struct{ io.ReadSeeker }

func (nopSeekCloser) Close() error { return nil }

// setSharedBody gives req the body the way azcore's policy.Request.SetBody
// does (Azure/azure-sdk-for-go, sdk/azcore/internal/exported/request.go,
// func SetBody, at commit 1a73469921e4; older versions of the file have the
// same GetBody): the size from Seek(0, io.SeekEnd), then Seek(0,
// io.SeekStart); Content-Length, as a header and as req.ContentLength;
// req.Body the caller's stream itself; and a GetBody that seeks that same
// stream back to 0 and returns it. Every attempt reads one stream.
func setSharedBody(req *http.Request, body io.ReadSeekCloser) error {
	size, err := body.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return err
	}
	req.Header.Set("Content-Length", strconv.FormatInt(size, 10))
	req.GetBody = func() (io.ReadCloser, error) {
		_, err := body.Seek(0, io.SeekStart)
		return body, err
	}
	req.Body = body
	req.ContentLength = size
	return nil
}

// setSeekableBody gives req a seekable body and no GetBody: what
// http.NewRequest makes of an *os.File, whose GetBody it sets only for
// bytes.Buffer, bytes.Reader and strings.Reader. (aws-sdk-go-v2 does not
// hand over such a body: see TestUploadsOfASeekableBodyWithoutGetBody.)
func setSeekableBody(req *http.Request, body io.ReadSeekCloser) error {
	size, err := body.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return err
	}
	req.Body = body
	req.ContentLength = size
	return nil
}

// uploadRun is one run of uploads and what came of them.
type uploadRun struct {
	uploads int
	setBody func(*http.Request, io.ReadSeekCloser) error

	h2 bool // HTTP/2 over TLS, else HTTP/1.1

	sink              uploadSink
	calls, attempts   atomic.Int64 // as httpretry's OnCall reports them
	succeeded, failed atomic.Int64
	firstErr          atomic.Value // string: the first failure, to show
	protoSeen         atomic.Value // string: the protocol of a response
	elapsed           time.Duration
}

// run PUTs r.uploads random bodies of uploadSize through a Transport over
// base, uploadWorkers at a time.
func (r *uploadRun) run(t *testing.T, base *http.Transport, url string) {
	tr := &httpretry.Transport{
		Base: base,
		Policy: httpretry.Policy{
			MaxAttempts:   uploadAttempts,
			Backoff:       backoff.Constant(2 * time.Millisecond),
			AttemptHeader: attemptHeader,
			// One attempt in three fails: the default budget would
			// rightly stop retrying, which is not what is tested here.
			NewBudget: httpretry.NoBudget,
		},
		OnCall: func(c httpretry.Call) {
			r.calls.Add(1)
			r.attempts.Add(int64(c.Attempts))
		},
	}
	client := &http.Client{Transport: tr}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range uploadWorkers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(r.uploads); i = next.Add(1) - 1 {
				if err := r.upload(t.Context(), client, url, i); err != nil {
					r.failed.Add(1)
					r.firstErr.CompareAndSwap(nil, fmt.Sprintf("upload %d: %v", i, err))
					continue
				}
				r.succeeded.Add(1)
			}
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
}

// randomBlock is the random content every upload's body is made of.
var randomBlock = sync.OnceValue(func() []byte {
	b := make([]byte, uploadSize)
	rand.NewChaCha8([32]byte{'u', 'p', 'l', 'o', 'a', 'd'}).Read(b)
	return b
})

// uploadBody returns the body of upload i, a fresh slice: randomBlock with
// i written at the start of every 64 KiB, so that no two uploads are
// alike. (Drawing 4 MiB from ChaCha8 for each upload costs more than the
// upload itself under the race detector.)
func uploadBody(i int64) []byte {
	b := bytes.Clone(randomBlock())
	for off := 0; off < len(b); off += 64 << 10 {
		binary.LittleEndian.PutUint64(b[off:], uint64(i))
	}
	return b
}

// upload sends upload i: a fresh body each time, since net/http may still
// read a body after RoundTrip has returned.
func (r *uploadRun) upload(ctx context.Context, client *http.Client, url string, i int64) error {
	data := uploadBody(i)
	sum := sha256.Sum256(data)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, nil)
	if err != nil {
		return err
	}
	id := strconv.FormatInt(i, 10)
	req.Header.Set(uploadIDHeader, id)
	req.Header.Set(digestHeader, hex.EncodeToString(sum[:]))
	req.Header.Set(sizeHeader, strconv.Itoa(uploadSize))
	if err := r.setBody(req, nopSeekCloser{bytes.NewReader(data)}); err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	r.protoSeen.CompareAndSwap(nil, resp.Proto)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// check asserts the outcome and logs its figure.
func (r *uploadRun) check(t *testing.T, what string) {
	t.Helper()
	s := &r.sink
	proto, _ := r.protoSeen.Load().(string)
	retries := r.attempts.Load() - r.calls.Load()
	figure(t, "Uploads", "%s (%s): %d uploads of %d MiB, %d succeeded, %d failed; %d attempts, %d retries (%d answered 503 before the body was read); corrupt bodies: %d (%d cut short, %d of a wrong length, %d with a wrong digest), %d intact; %v",
		what, proto, r.uploads, uploadSize>>20, r.succeeded.Load(), r.failed.Load(),
		r.attempts.Load(), retries, s.early.Load(),
		s.corrupt(), s.readErrs.Load(), s.wrongLength.Load(), s.wrongDigest.Load(), s.intact.Load(),
		r.elapsed.Round(time.Millisecond))
	if n := s.corrupt(); n > 0 {
		t.Errorf("%d attempts' bodies did not arrive as sent (%d cut short, %d of a wrong length, %d with a wrong digest)",
			n, s.readErrs.Load(), s.wrongLength.Load(), s.wrongDigest.Load())
	}
	if n := r.failed.Load(); n > 0 {
		first, _ := r.firstErr.Load().(string)
		t.Errorf("%d of %d uploads failed; first: %s", n, r.uploads, first)
	}
	if retries == 0 || s.early.Load() == 0 {
		t.Errorf("%d retries after %d early 503s: the test proved nothing", retries, s.early.Load())
	}
	if r.h2 && proto != "HTTP/2.0" {
		t.Errorf("answered over %q, want HTTP/2.0", proto)
	}
}

// startUploadSink serves r's sink over HTTP/1.1, or HTTP/2 over TLS, and
// returns a fresh pooled transport to it and its URL.
func startUploadSink(t *testing.T, r *uploadRun) (*http.Transport, string) {
	if !r.h2 {
		up := startUpstream(t, &r.sink, nil, nil)
		return freshBase(t), "http://" + up.addr + "/blob"
	}
	cfg, _ := testPKI()
	up := startUpstream(t, &r.sink, cfg, nil)
	return h2Base(t), "https://" + up.addr + "/blob"
}

// TestUploadsThroughASharedRewindingBody: 4 MiB PUTs whose GetBody rewinds
// the one stream every attempt reads, as azcore's does (setSharedBody),
// retried after early 503s, arrive intact, over HTTP/1.1 and over HTTP/2.
// httpretry must not call GetBody for a retry while Base may still be
// reading the previous attempt's body: net/http closes a request body
// when it is done with it, possibly after RoundTrip has returned.
func TestUploadsThroughASharedRewindingBody(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h2      bool
		uploads int
	}{
		{"HTTP/1.1", false, 200},
		// Fewer: under the race detector every byte costs about twice
		// as much through TLS and HTTP/2's framing.
		{"HTTP/2", true, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &uploadRun{uploads: tc.uploads, setBody: setSharedBody, h2: tc.h2}
			base, url := startUploadSink(t, r)
			r.run(t, base, url)
			r.check(t, "GetBody rewinding one shared stream, as azcore's")
		})
	}
}

// TestUploadsOfASeekableBodyWithoutGetBody: 4 MiB PUTs whose body is an
// io.Seeker and that have no GetBody, four times the default
// MaxReplayBytes, are retried after early 503s by rewinding the body with
// Seek (once the previous attempt's body is closed), and arrive intact.
//
// Not the shape aws-sdk-go-v2 gives its RoundTripper, though its payloads
// are io.ReadSeekers: smithy-go's Request.Build (aws/smithy-go v1.27.7,
// transport/http/request.go) hands net/http the stream wrapped as
// NewSafeReadCloser(io.NopCloser(stream)) (transport/http/internal/io/
// safe.go), which has Read and Close (and WriteTo) but no Seek, and sets no
// GetBody. The SDK retries above the RoundTripper (aws-sdk-go-v2,
// aws/retry/middleware.go, Attempt.HandleFinalize): it builds a new
// http.Request for each attempt, and before rewinding the stream
// (RewindStream) it has closed the previous attempt's wrapper, after
// which a write loop still holding it reads EOF. Below the SDK, httpretry
// sees a stream it cannot rewind.
func TestUploadsOfASeekableBodyWithoutGetBody(t *testing.T) {
	r := &uploadRun{uploads: 64, setBody: setSeekableBody}
	base, url := startUploadSink(t, r)
	r.run(t, base, url)
	r.check(t, "an io.Seeker without GetBody, past MaxReplayBytes")
}
