package replay

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shared is one seekable stream, as azcore's body is, that counts closes.
type shared struct {
	*strings.Reader
	closes int
}

func (s *shared) Close() error { s.closes++; return nil }

func readN(t *testing.T, r io.Reader, n int) string {
	t.Helper()
	buf := make([]byte, n)
	_, err := io.ReadFull(r, buf)
	require.NoError(t, err)
	return string(buf)
}

// TestReadersOfASharedStreamKeepTheirPositions: readers of one stream that
// GetBody rewinds and hands out again read it in turns, each from where it
// was, as if each had a copy of its own.
func TestReadersOfASharedStreamKeepTheirPositions(t *testing.T) {
	t.Parallel()
	s := &shared{Reader: strings.NewReader("0123456789")}
	req, _ := http.NewRequest(http.MethodPut, "https://h/", s)
	req.GetBody = func() (io.ReadCloser, error) {
		_, err := s.Seek(0, io.SeekStart)
		return s, err
	}
	r := New(req, 1<<20, true, true)
	first := r.First()
	assert.Equal(t, "0123", readN(t, first, 4))
	copy, err := r.GetBodyFor(context.Background(), req.GetBody)()
	require.NoError(t, err)
	assert.Equal(t, "012", readN(t, copy, 3), "a copy from the start")
	assert.Equal(t, "456", readN(t, first, 3), "the first reads on from where it was")
	hedge, err := r.Next(context.Background(), true)
	require.NoError(t, err)
	rest, _ := io.ReadAll(hedge)
	assert.Equal(t, "0123456789", string(rest))
	assert.Equal(t, "789", readN(t, first, 3))
}

// TestCopyAsSent: a body without GetBody that cannot seek is copied as it
// is read, up to the limit; a retry reads the copy and then the rest of
// the caller's body; past the limit it cannot be had again.
func TestCopyAsSent(t *testing.T) {
	t.Parallel()
	body := io.NopCloser(io.MultiReader(strings.NewReader("hello "), strings.NewReader("world")))
	req, _ := http.NewRequest(http.MethodPost, "https://h/", body)
	r := New(req, 64, true, false)
	first := r.First()
	assert.Equal(t, "hel", readN(t, first, 3), "an answer came early: the rest was never read")
	retry, err := r.Next(context.Background(), false)
	require.NoError(t, err)
	all, err := io.ReadAll(retry)
	require.NoError(t, err)
	assert.Equal(t, "hello world", string(all))
	_, err = first.Read(make([]byte, 1))
	assert.ErrorIs(t, err, errDetached, "the earlier attempt's body is detached")

	big := io.NopCloser(bytes.NewReader(make([]byte, 100)))
	req, _ = http.NewRequest(http.MethodPost, "https://h/", big)
	r = New(req, 10, true, false)
	_, err = io.ReadAll(r.First())
	require.NoError(t, err)
	assert.False(t, r.Replayable())
	_, err = r.Next(context.Background(), false)
	assert.ErrorIs(t, err, ErrBody)
}

// TestEndClosesTheCallersBody: once the call is over, the caller's body is
// closed exactly once, even when a reader of it was never closed.
func TestEndClosesTheCallersBody(t *testing.T) {
	t.Parallel()
	s := &shared{Reader: strings.NewReader("payload")}
	req, _ := http.NewRequest(http.MethodPut, "https://h/", s)
	r := New(req, 1<<20, true, false) // a Seeker without GetBody
	dropped := r.First()
	io.ReadAll(dropped)
	copy, err := r.GetBodyFor(context.Background(), nil)()
	require.NoError(t, err)
	io.ReadAll(copy)
	copy.Close()
	r.End()
	assert.Equal(t, 1, s.closes)
	dropped.Close()
	assert.Equal(t, 1, s.closes, "once")
}

// TestNoBody: a request without a body needs no replay.
func TestNoBody(t *testing.T) {
	t.Parallel()
	req, _ := http.NewRequest(http.MethodGet, "https://h/", nil)
	r := New(req, 1<<20, true, true)
	assert.Nil(t, r)
	assert.True(t, r.Replayable())
	assert.True(t, r.Hedgeable())
	assert.NoError(t, r.Failed(nil))
	r.End()
}
