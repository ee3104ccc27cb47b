package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/seedhq/httpretry"
	"github.com/seedhq/httpretry/backoff"
)

// Resuming response bodies (Policy.MaxResumes, issue 22): large files
// served by nginx and by http.ServeContent, behind a toxiproxy whose
// limit_data toxic ends every connection after a fixed number of bytes.

const (
	resumeFileSize = 256 << 20 // the 256 MiB
	resumeCut      = 16 << 20  // bytes each connection carries, header included
)

// writeFile writes size bytes of a seeded PRNG to a file named name in
// dir, and returns its path and SHA-256.
func writeFile(t testing.TB, dir, name string, size int, seed uint64) (string, [32]byte) {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	src := rand.NewChaCha8(key)
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= len(buf) {
		chunk := buf[:min(left, len(buf))]
		src.Read(chunk)
		w.Write(chunk)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return path, sum
}

// nginxStaticConf serves the files of {{root}} as nginx does out of the
// box: a strong ETag (mtime-size), Last-Modified, Accept-Ranges: bytes,
// and If-Range honoured.
const nginxStaticConf = nginxPreamble + `
	server {
		listen 127.0.0.1:{{port}};
		root {{root}};
	}
}
`

// fileServer is one server of the files of a directory, behind a proxy of
// its own.
type fileServer struct {
	name  string
	url   string // the server itself
	proxy *toxiclient.Proxy
}

// via returns the URL of file through the server's proxy.
func (s fileServer) via(file string) string { return "http://" + s.proxy.Listen + "/" + file }

// fileServers starts nginx and a Go server (http.ServeContent, with a
// strong ETag made of the file's mtime and size, as nginx makes its own)
// on the files of dir, each behind a proxy of x.
func fileServers(t *testing.T, x *toxi, dir string) []fileServer {
	t.Helper()
	goSrv := httptest.NewServer(serveContent(dir, true))
	t.Cleanup(goSrv.Close)
	servers := []fileServer{{name: "http.ServeContent", url: goSrv.URL}}
	if _, err := nginxBinary(); err == nil || os.Getenv("CI") == "true" {
		ng := startNginxConf(t, strings.ReplaceAll(nginxStaticConf, "{{root}}", dir))
		servers = append([]fileServer{{name: "nginx", url: ng.url}}, servers...)
	} else {
		figures.Lock()
		figures.skips = append(figures.skips, t.Name()+": nginx not found; the Go server ran alone")
		figures.Unlock()
	}
	for i := range servers {
		servers[i].proxy = x.proxy(t, strings.TrimPrefix(servers[i].url, "http://"))
	}
	return servers
}

// serveContent serves the files of dir by http.ServeContent, which
// honours Range and If-Range, with a strong ETag if etag is set.
func serveContent(dir string, etag bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(filepath.Join(dir, filepath.Base(r.URL.Path)))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if etag {
			w.Header().Set("Etag", fmt.Sprintf(`"%x-%x"`, fi.ModTime().Unix(), fi.Size()))
		}
		http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
	})
}

// cutEvery makes p end each connection after n bytes from the server.
func cutEvery(t *testing.T, p *toxiclient.Proxy, n int) {
	t.Helper()
	f := toxic{name: "cut", typ: "limit_data", stream: "downstream", attrs: toxiclient.Attributes{"bytes": n}}
	if err := f.apply(p); err != nil {
		t.Fatalf("applying %v: %v", f, err)
	}
}

// fetched is the outcome of one download.
type fetched struct {
	status  int
	n       int64 // body bytes read
	sum     [32]byte
	err     error // RoundTrip's, or the body's read error
	elapsed time.Duration
}

// fetch downloads url through c, hashing the body as it is read.
func fetch(ctx context.Context, c *http.Client, url string) fetched {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fetched{err: err}
	}
	resp, err := c.Do(req)
	if err != nil {
		return fetched{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, resp.Body, make([]byte, 32<<10))
	r := fetched{status: resp.StatusCode, n: n, err: err, elapsed: time.Since(start)}
	h.Sum(r.sum[:0])
	return r
}

// waits is a backoff strategy that passes on another's delays and adds
// them up: the time a download spent waiting before its resumes.
type waits struct {
	backoff.Strategy
	n     atomic.Int64
	total atomic.Int64 // nanoseconds
}

func (w *waits) Delay(n int, prev time.Duration, r *rand.Rand) time.Duration {
	d := w.Strategy.Delay(n, prev, r)
	w.n.Add(1)
	w.total.Add(int64(d))
	return d
}

func (w *waits) sum() time.Duration { return time.Duration(w.total.Load()) }

// resumes counts the resumes a Transport reports, and how they ended.
type resumes struct {
	mu      sync.Mutex
	n, good int
	ranges  []string
}

func (r *resumes) observe(a httpretry.Attempt) {
	if !a.Resume {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if a.Stop == httpretry.StopSuccess {
		r.good++
	}
	r.ranges = append(r.ranges, a.Request.Header.Get("Range"))
}

func (r *resumes) counts() (n, good int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.good
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// TestResumeLargeFile downloads a 256 MiB file from nginx and from
// http.ServeContent through a proxy that ends every connection after
// 16 MiB: through httpretry every download completes with the file's
// SHA-256, and the heap holds no copy of it; go-retryablehttp and
// failsafe-go, beside, hand the cut to their caller.
func TestResumeLargeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads 256 MiB files")
	}
	dir := t.TempDir()
	_, want := writeFile(t, dir, "big.bin", resumeFileSize, 22)
	x := startToxiproxy(t)
	servers := fileServers(t, x, dir)
	// The uninterrupted downloads, through the same proxies and the same
	// Transport, one at a time.
	uninterrupted := map[string]fetched{}
	for _, srv := range servers {
		plain := &http.Client{Transport: &httpretry.Transport{Base: freshBase(t)}}
		base := fetch(t.Context(), plain, srv.via("big.bin"))
		if base.err != nil || base.sum != want {
			t.Fatalf("%s: uninterrupted download: %d bytes, error %v", srv.name, base.n, base.err)
		}
		uninterrupted[srv.name] = base
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			// Most of a cut download is its backoff waits: the servers'
			// downloads wait side by side.
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			url := srv.via("big.bin")
			base := uninterrupted[srv.name]
			cutEvery(t, srv.proxy, resumeCut)
			w := &waits{Strategy: backoff.Default()}
			var rs resumes
			tr := &httpretry.Transport{Base: freshBase(t), OnAttempt: rs.observe,
				Policy: httpretry.Policy{MaxResumes: 32, Backoff: w}}
			stop := heapPeak()
			got := fetch(ctx, &http.Client{Transport: tr}, url)
			heap := stop()
			if got.err != nil || got.n != resumeFileSize || got.sum != want {
				t.Fatalf("cut download: %d bytes, error %v, SHA-256 equal: %v", got.n, got.err, got.sum == want)
			}
			n, good := rs.counts()
			if wantN := int(resumeFileSize / (resumeCut - 1024)); n < wantN || n != good {
				t.Errorf("%d resumes, %d accepted: want at least %d, all accepted", n, good, wantN)
			}
			for i, r := range rs.ranges {
				if !strings.HasPrefix(r, "bytes=") || !strings.HasSuffix(r, "-") {
					t.Errorf("resume %d asked for %q", i+1, r)
				}
			}
			transfer := got.elapsed - w.sum()
			ratio := float64(transfer) / float64(base.elapsed)
			// Loose: a shared 2-core machine under the race detector
			// must not make this flake; the figure says what it was.
			if got.elapsed > 4*base.elapsed+w.sum()+10*time.Second {
				t.Errorf("cut download took %v (waits %v), uninterrupted %v", got.elapsed, w.sum(), base.elapsed)
			}
			if heap > resumeFileSize/4 {
				t.Errorf("heap in use rose by %s during the download of %s", mib(int64(heap)), mib(resumeFileSize))
			}
			figure(t, "Resume", "%s, %s file, connection ended every %s (toxiproxy limit_data): httpretry (MaxResumes: 32, default backoff) read all %d bytes, SHA-256 equal, in %d resumes; %v against %v uninterrupted (%.2f ×), of which %v were backoff waits (%d); without the waits %v, %.2f × the uninterrupted download (the servers' cut downloads ran side by side, the uninterrupted ones one at a time)",
				srv.name, mib(resumeFileSize), mib(resumeCut), got.n, n, got.elapsed.Round(time.Millisecond),
				base.elapsed.Round(time.Millisecond), float64(got.elapsed)/float64(base.elapsed),
				w.sum().Round(time.Millisecond), w.n.Load(), transfer.Round(time.Millisecond), ratio)
			figure(t, "Resume", "%s: heap in use rose by at most %s during that download (live and unswept heap objects sampled every millisecond; the toxiproxy and Go server in the same process included): no copy of the %s body",
				srv.name, mib(int64(heap)), mib(resumeFileSize))

			// The default policy resumes MaxAttempts-1 = 3 times.
			var drs resumes
			dflt := &http.Client{Transport: &httpretry.Transport{Base: freshBase(t), OnAttempt: drs.observe}}
			d := fetch(ctx, dflt, url)
			var re *httpretry.ResumeError
			if !errors.As(d.err, &re) || !errors.Is(d.err, io.ErrUnexpectedEOF) || re.Offset != d.n {
				t.Errorf("default policy: %d bytes, error %v: want a ResumeError at the offset read", d.n, d.err)
			}
			dn, _ := drs.counts()
			figure(t, "Resume", "%s: the default policy (MaxResumes 0: MaxAttempts−1 = 3) resumes %d times, then ends the read after %s with a *ResumeError (%q), unwrapping to io.ErrUnexpectedEOF",
				srv.name, dn, mib(d.n), reasonOf(d.err))

			for _, p := range downloadPeers(t) {
				r := fetch(ctx, p.client, url)
				if r.err == nil && r.sum == want {
					t.Errorf("%s completed a download cut every %s", p.name, mib(resumeCut))
				}
				figure(t, "Resume", "%s, %s (%s): the caller's read failed after %s of %s: %v",
					srv.name, p.name, p.setup, mib(r.n), mib(resumeFileSize), r.err)
			}
		})
	}
}

// reasonOf returns the Reason of the ResumeError in err, or "".
func reasonOf(err error) string {
	var re *httpretry.ResumeError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}
