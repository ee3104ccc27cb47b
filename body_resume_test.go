package httpretry_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
	"github.com/seedhq/httpretry/httpretrytest"
)

// cutServer serves a file with http.ServeContent and cuts the connection
// (hijacks and closes it) once a response has sent cut bytes of its body.
type cutServer struct {
	cut int // bytes of a response's body before the cut; 0: never

	mu       sync.Mutex
	content  []byte
	etag     string // "" for none
	modtime  time.Time
	ranges   []string // each request's Range header
	ifRanges []string // ... and If-Range
	encoding []string // ... and Accept-Encoding
	onCut    func()   // called after each cut, before the next request is served
	ignore   bool     // serve every request as a 200 of the whole, ignoring Range
	gzipped  bool     // the file is sent gzip-encoded, Content-Encoding: gzip
}

func (s *cutServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.ranges = append(s.ranges, r.Header.Get("Range"))
	s.ifRanges = append(s.ifRanges, r.Header.Get("If-Range"))
	s.encoding = append(s.encoding, r.Header.Get("Accept-Encoding"))
	content, etag, modtime, ignore, gz := s.content, s.etag, s.modtime, s.ignore, s.gzipped
	s.mu.Unlock()
	cw := &cutWriter{ResponseWriter: w, left: s.cut, s: s}
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
	}
	if ignore {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", itoa(len(content)))
		cw.Write(content)
		return
	}
	http.ServeContent(cw, r, "file.bin", modtime, bytes.NewReader(content))
}

// cutWriter passes a response's body on until left bytes are sent, then
// cuts the connection.
type cutWriter struct {
	http.ResponseWriter
	left int
	s    *cutServer
	cut  bool
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if w.cut {
		return 0, errors.New("cut")
	}
	if w.s.cut <= 0 || len(p) <= w.left {
		w.left -= len(p)
		return w.ResponseWriter.Write(p)
	}
	n, _ := w.ResponseWriter.Write(p[:w.left])
	w.cut = true
	rc := http.NewResponseController(w.ResponseWriter)
	conn, _, err := rc.Hijack()
	w.s.mu.Lock()
	onCut := w.s.onCut
	w.s.mu.Unlock()
	if onCut != nil {
		onCut()
	}
	if err != nil { // HTTP/2: reset the stream
		rc.Flush()
		panic(http.ErrAbortHandler)
	}
	conn.Close()
	return n, errors.New("cut")
}

func itoa(n int) string { return strconv.Itoa(n) }

// randomFile returns n bytes that no two offsets share by accident.
func randomFile(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}

// download GETs url through tr and returns what the body gave and the
// error that ended it (nil at io.EOF).
func download(t *testing.T, ctx context.Context, tr http.RoundTripper, url string, header http.Header) ([]byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var buf bytes.Buffer
	_, err = io.Copy(&buf, resp.Body)
	return buf.Bytes(), err
}

func TestResumeDownloadsAFileCutEveryMiB(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		h2       bool
		etag     string
		modtime  time.Time
		ifRange  string
		contains string
	}{
		{name: "strong ETag", etag: `"v1"`, ifRange: `"v1"`},
		{name: "strong ETag, HTTP/2 streams reset", h2: true, etag: `"v1"`, ifRange: `"v1"`},
		{name: "Last-Modified a second before Date", modtime: time.Now().Add(-time.Hour), contains: "GMT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			content := randomFile(4<<20+123, 1)
			s := &cutServer{cut: 1 << 20, content: content, etag: tc.etag, modtime: tc.modtime}
			srv := startServer(t, s, tc.h2, nil)
			var log httpretrytest.AttemptLog
			tr := &httpretry.Transport{Base: srv.Client().Transport, OnAttempt: log.Record,
				Policy: httpretry.Policy{Backoff: backoff.Constant(0), MaxResumes: 8}}
			got, err := download(t, context.Background(), tr, srv.URL+"/file.bin", nil)
			require.NoError(t, err)
			assert.Equal(t, sha256.Sum256(content), sha256.Sum256(got))

			s.mu.Lock()
			defer s.mu.Unlock()
			require.Len(t, s.ranges, 5, "a MiB per response: the first and four resumes")
			for i, r := range s.ranges[1:] {
				assert.Equal(t, "bytes="+itoa((i+1)<<20)+"-", r)
				if tc.ifRange != "" {
					assert.Equal(t, tc.ifRange, s.ifRanges[i+1])
				}
				assert.Contains(t, s.ifRanges[i+1], tc.contains)
				assert.Equal(t, "identity", s.encoding[i+1], "a resume asks for no content coding")
			}
			as := log.Attempts()
			require.Len(t, as, 5)
			for i, a := range as {
				assert.Equal(t, i+1, a.N)
				assert.Equal(t, i > 0, a.Resume)
				assert.Equal(t, httpretry.StopSuccess, a.Stop)
			}
		})
	}
}

func TestResumeNeverSplicesTwoRepresentations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(s *cutServer)
		status int
	}{
		{"ETag changes: If-Range fails, the server sends the whole new file", func(s *cutServer) {
			s.content, s.etag = randomFile(len(s.content), 2), `"v2"`
		}, http.StatusOK},
		{"the server ignores Range", func(s *cutServer) { s.ignore = true }, http.StatusOK},
		{"the length changes under the same ETag", func(s *cutServer) {
			s.content = randomFile(len(s.content)+10, 2)
		}, http.StatusPartialContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			content := randomFile(2<<20, 1)
			s := &cutServer{cut: 1 << 20, content: content, etag: `"v1"`}
			s.onCut = func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				tc.change(s)
				s.onCut = nil
				s.cut = 0
			}
			srv := startServer(t, s, false, nil)
			tr := &httpretry.Transport{Base: srv.Client().Transport, Policy: noWait}
			got, err := download(t, context.Background(), tr, srv.URL+"/file.bin", nil)
			var re *httpretry.ResumeError
			require.ErrorAs(t, err, &re)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the read error that broke the body is still there")
			assert.Equal(t, tc.status, re.Status)
			assert.EqualValues(t, 1<<20, re.Offset)
			assert.Equal(t, content[:len(got)], got, "only bytes of the first representation")
			assert.Len(t, got, 1<<20)
			t.Log(err)
		})
	}
}

func TestResumeOnlyWhenSafe(t *testing.T) {
	t.Parallel()
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	for _, tc := range []struct {
		name   string
		server func(s *cutServer)
		policy httpretry.Policy
		ctx    func(context.Context) context.Context
		header http.Header
	}{
		{name: "weak ETag", server: func(s *cutServer) { s.etag = `W/"v1"` }},
		{name: "no validator", server: func(s *cutServer) { s.etag = "" }},
		{name: "Last-Modified not a second before Date", server: func(s *cutServer) {
			s.etag, s.modtime = "", time.Now().Add(time.Hour)
		}},
		{name: "gzip-encoded, decompressed by net/http", server: func(s *cutServer) {
			s.content, s.gzipped = gz(s.content), true
		}},
		{name: "gzip-encoded, asked for by the caller", server: func(s *cutServer) {
			s.content, s.gzipped = gz(s.content), true
		}, header: http.Header{"Accept-Encoding": {"gzip"}}},
		{name: "MaxResumes negative", policy: httpretry.Policy{MaxResumes: -1}},
		{name: "MaxAttempts 1", policy: httpretry.Policy{MaxAttempts: 1}},
		{name: "WithoutRetries", ctx: httpretry.WithoutRetries},
		{name: "WithPolicy turns it off", ctx: func(ctx context.Context) context.Context {
			return httpretry.WithPolicy(ctx, func(p *httpretry.Policy) { p.MaxResumes = -1 })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			content := randomFile(2<<20, 1)
			s := &cutServer{cut: 1 << 20, content: content, etag: `"v1"`}
			if tc.server != nil {
				tc.server(s)
			}
			srv := startServer(t, s, false, nil)
			tc.policy.Backoff = backoff.Constant(0)
			tr := &httpretry.Transport{Base: srv.Client().Transport, Policy: tc.policy}
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx(ctx)
			}
			_, err := download(t, ctx, tr, srv.URL+"/file.bin", tc.header)
			require.Error(t, err)
			var re *httpretry.ResumeError
			assert.False(t, errors.As(err, &re), "today's error, not a resume's: %v", err)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			s.mu.Lock()
			defer s.mu.Unlock()
			assert.Len(t, s.ranges, 1, "no resume")
		})
	}
}
