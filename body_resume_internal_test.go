package httpretry

import (
	"fmt"
	"testing"
)

// FuzzParseContentRange: whatever the header holds, a range that parses
// is one that the header states exactly, and says what a resume checks.
func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/100", "bytes 10-99/*", "bytes 10-9/100", "bytes -1-2/3", "bytes 1-2/2",
		"bytes 00-01/02", "bytes 9223372036854775806-9223372036854775806/9223372036854775807", "bytes 1-2/99999999999999999999", "items 0-1/2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		first, last, complete, ok := parseContentRange(s)
		if !ok {
			return
		}
		if first < 0 || last < first || (complete >= 0 && last >= complete) || complete < -1 {
			t.Fatalf("%q: %d-%d/%d", s, first, last, complete)
		}
		total := "*"
		if complete >= 0 {
			total = fmt.Sprint(complete)
		}
		var f2, l2 int64
		var t2 string
		if _, err := fmt.Sscanf(s, "bytes %d-%d/%s", &f2, &l2, &t2); err != nil || f2 != first || l2 != last || (t2 != total && complete < 0) {
			t.Fatalf("%q read back as %d-%d/%s: %v", s, f2, l2, t2, err)
		}
	})
}
