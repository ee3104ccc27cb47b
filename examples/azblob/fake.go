package main

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fakeBlob serves as much of Azure Blob Storage's REST API as this example
// calls, with anonymous access (no request is signed):
//
//   - Put Blob: PUT /container/blob with x-ms-blob-type: BlockBlob stores
//     the body; with x-ms-blob-type: AppendBlob it creates an empty append
//     blob (Create Append Blob).
//   - Append Block: PUT /container/blob?comp=appendblock appends the body to
//     an append blob; with x-ms-blob-condition-appendpos it appends only if
//     the blob is that long, and answers 412 AppendPositionConditionNotMet
//     otherwise.
//   - Get Blob: GET /container/blob, with x-ms-range or Range of the form
//     bytes=N- or bytes=N-M.
//
// Errors are Azure's: the status, an x-ms-error-code header and an XML body
// with the code and a message, which azcore's ResponseError parses. It keeps
// no containers (any first path segment will do), no metadata, no leases.
type fakeBlob struct {
	mu    sync.Mutex
	blobs map[string]*blob // by URL path
}

type blob struct {
	kind   string   // "BlockBlob" or "AppendBlob"
	blocks [][]byte // an append blob's blocks, in order; a block blob's one
	etag   int
}

func newFakeBlob() *fakeBlob { return &fakeBlob{blobs: map[string]*blob{}} }

// data returns the blob's content.
func (b *blob) data() []byte {
	var out []byte
	for _, blk := range b.blocks {
		out = append(out, blk...)
	}
	return out
}

// appended returns the blocks of the blob at path, or nil if there is none.
func (s *fakeBlob) appended(path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.blobs[path]
	if b == nil {
		return nil
	}
	out := make([]string, len(b.blocks))
	for i, blk := range b.blocks {
		out[i] = string(blk)
	}
	return out
}

func (s *fakeBlob) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.Count(strings.Trim(r.URL.Path, "/"), "/") < 1 {
		azError(w, http.StatusBadRequest, "InvalidUri", "this fake serves blobs only: /container/blob")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		azError(w, http.StatusBadRequest, "InvalidInput", err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	comp := r.URL.Query().Get("comp")
	switch {
	case r.Method == http.MethodPut && comp == "":
		s.putBlob(w, r, body)
	case r.Method == http.MethodPut && comp == "appendblock":
		s.appendBlock(w, r, body)
	case r.Method == http.MethodGet && comp == "":
		s.getBlob(w, r)
	default:
		azError(w, http.StatusBadRequest, "UnsupportedHttpVerb", fmt.Sprintf("this fake does not serve %s ?comp=%s", r.Method, comp))
	}
}

// putBlob is Put Blob, and Create Append Blob.
func (s *fakeBlob) putBlob(w http.ResponseWriter, r *http.Request, body []byte) {
	b := &blob{kind: r.Header.Get("x-ms-blob-type")}
	switch b.kind {
	case "BlockBlob":
		b.blocks = [][]byte{body}
		sum := md5.Sum(body)
		w.Header().Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	case "AppendBlob":
		if len(body) != 0 {
			azError(w, http.StatusBadRequest, "InvalidHeaderValue", "Create Append Blob takes no body")
			return
		}
	default:
		azError(w, http.StatusBadRequest, "MissingRequiredHeader", "x-ms-blob-type is BlockBlob or AppendBlob here")
		return
	}
	if old := s.blobs[r.URL.Path]; old != nil {
		b.etag = old.etag
	}
	b.etag++
	s.blobs[r.URL.Path] = b
	s.headers(w, b)
	w.WriteHeader(http.StatusCreated)
}

// appendBlock is Append Block.
func (s *fakeBlob) appendBlock(w http.ResponseWriter, r *http.Request, body []byte) {
	b := s.blobs[r.URL.Path]
	switch {
	case b == nil:
		azError(w, http.StatusNotFound, "BlobNotFound", "The specified blob does not exist.")
		return
	case b.kind != "AppendBlob":
		azError(w, http.StatusConflict, "InvalidBlobType", "The blob type is invalid for this operation.")
		return
	}
	size := int64(len(b.data()))
	if v := r.Header.Get("x-ms-blob-condition-appendpos"); v != "" {
		pos, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			azError(w, http.StatusBadRequest, "InvalidHeaderValue", "x-ms-blob-condition-appendpos: "+err.Error())
			return
		}
		if pos != size {
			azError(w, http.StatusPreconditionFailed, "AppendPositionConditionNotMet",
				"The append position condition specified was not met.")
			return
		}
	}
	b.blocks = append(b.blocks, body)
	b.etag++
	s.headers(w, b)
	w.Header().Set("x-ms-blob-append-offset", strconv.FormatInt(size, 10))
	w.Header().Set("x-ms-blob-committed-block-count", strconv.Itoa(len(b.blocks)))
	w.WriteHeader(http.StatusCreated)
}

// getBlob is Get Blob.
func (s *fakeBlob) getBlob(w http.ResponseWriter, r *http.Request) {
	b := s.blobs[r.URL.Path]
	if b == nil {
		azError(w, http.StatusNotFound, "BlobNotFound", "The specified blob does not exist.")
		return
	}
	data := b.data()
	s.headers(w, b)
	w.Header().Set("x-ms-blob-type", b.kind)
	w.Header().Set("Accept-Ranges", "bytes")
	status := http.StatusOK
	rng := r.Header.Get("x-ms-range")
	if rng == "" {
		rng = r.Header.Get("Range")
	}
	if rng != "" {
		start, end, ok := parseRange(rng, int64(len(data)))
		if !ok {
			azError(w, http.StatusRequestedRangeNotSatisfiable, "InvalidRange", "The range specified is invalid for the current size of the resource.")
			return
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
		data, status = data[start:end+1], http.StatusPartialContent
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// parseRange parses bytes=N- or bytes=N-M against a blob of size bytes.
func parseRange(v string, size int64) (start, end int64, ok bool) {
	from, to, found := strings.Cut(strings.TrimPrefix(v, "bytes="), "-")
	if !found || !strings.HasPrefix(v, "bytes=") {
		return 0, 0, false
	}
	start, err := strconv.ParseInt(from, 10, 64)
	if err != nil || start < 0 || start >= size {
		return 0, 0, false
	}
	end = size - 1
	if to != "" {
		if end, err = strconv.ParseInt(to, 10, 64); err != nil || end < start {
			return 0, 0, false
		}
		end = min(end, size-1)
	}
	return start, end, true
}

// headers sets what every successful answer about b carries.
func (s *fakeBlob) headers(w http.ResponseWriter, b *blob) {
	w.Header().Set("ETag", fmt.Sprintf(`"0x%X"`, b.etag))
	w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
	w.Header().Set("x-ms-version", "2025-11-05")
}

// azError answers as Azure Storage does when it refuses a request.
func azError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-ms-error-code", code)
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `<?xml version="1.0" encoding="utf-8"?>`+"\n<Error><Code>"+code+"</Code><Message>")
	_ = xml.EscapeText(w, []byte(msg))
	_, _ = io.WriteString(w, "</Message></Error>")
}
