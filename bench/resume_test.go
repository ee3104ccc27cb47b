package bench

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/seedhq/httpretry"
)

// resumeFile is the download of BenchmarkResume: 64 MiB.
var resumeFile = bytes.Repeat([]byte("0123456789abcdef"), 64<<20/16)

// cutEvery serves resumeFile with a strong ETag and Range support, and
// cuts the connection (hijacks and closes it) once a response has sent
// cut bytes of its body; 0 never cuts.
func cutEvery(cut int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(&cutter{ResponseWriter: w, left: cut, cuts: cut > 0}, r, "file.bin", time.Time{}, bytes.NewReader(resumeFile))
	})
}

type cutter struct {
	http.ResponseWriter
	left int  // bytes before the cut
	cuts bool // false: never
	cut  bool
}

func (w *cutter) Write(p []byte) (int, error) {
	switch {
	case w.cut:
		return 0, errors.New("cut")
	case !w.cuts || len(p) <= w.left:
		w.left -= len(p)
		return w.ResponseWriter.Write(p)
	}
	n, _ := w.ResponseWriter.Write(p[:w.left])
	w.cut = true
	if conn, _, err := http.NewResponseController(w.ResponseWriter).Hijack(); err == nil {
		conn.Close()
	}
	return n, errors.New("cut")
}

// BenchmarkResume is a 64 MiB download through httpretry's default
// policy over loopback, uncut and cut every 8 MiB: what the resumes cost
// a body that flows between cuts. Each download has a Transport of its
// own over one http.Transport: the retry budget is a download's. Compare case=cut-8MiB with case=uncut
// in rounds of separate processes, the order turned each round:
//
//	for i in 1 2 3 4 5 6; do for c in uncut cut-8MiB; do ...; done; done
//
// (docs/performance.md has the loop.)
func BenchmarkResume(b *testing.B) {
	for _, c := range []struct {
		name string
		cut  int
	}{{"uncut", 0}, {"cut-8MiB", 8 << 20}} {
		b.Run("case="+c.name, func(b *testing.B) {
			srv := httptest.NewServer(cutEvery(c.cut))
			defer srv.Close()
			base := &http.Transport{}
			b.SetBytes(int64(len(resumeFile)))
			for b.Loop() {
				// A Transport a download, each with a full retry budget:
				// one Transport's budget, at 7 resumes a download, runs
				// out as it should in a long series of broken downloads.
				tr := &httpretry.Transport{Base: base}
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != int64(len(resumeFile)) {
					b.Fatalf("read %d of %d: %v", n, len(resumeFile), err)
				}
			}
		})
	}
}

// BenchmarkResumeByHand is the floor BenchmarkResume/case=cut-8MiB is
// measured against: the same download cut every 8 MiB, resumed by hand
// with a Range request at once after each cut, over a bare http.Transport.
// What is left between it and case=uncut is the cuts' own cost: a new
// connection, and its TCP windows growing again.
func BenchmarkResumeByHand(b *testing.B) {
	srv := httptest.NewServer(cutEvery(8 << 20))
	defer srv.Close()
	base := &http.Transport{}
	b.SetBytes(int64(len(resumeFile)))
	for b.Loop() {
		var off int64
		for off < int64(len(resumeFile)) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			if off > 0 {
				req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
			}
			resp, err := base.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			off += n
		}
	}
}

// The benchmark's download is whole when cut, with the default policy.
func TestResumeBenchmarkDownloads(t *testing.T) {
	srv := httptest.NewServer(cutEvery(8 << 20))
	defer srv.Close()
	var resumes int
	tr := &httpretry.Transport{Base: &http.Transport{}, OnAttempt: func(a httpretry.Attempt) {
		if a.Resume {
			resumes++
		}
	}}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, resumeFile) {
		t.Fatalf("read %d of %d bytes: %v", len(got), len(resumeFile), err)
	}
	if resumes != 7 {
		t.Errorf("%d resumes, want 7", resumes)
	}
}
