package httpretry_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

var errBoom = errors.New("boom")

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		t.Fatalf("read: %v", err)
	}
	return buf.String()
}
