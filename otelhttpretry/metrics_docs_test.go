package otelhttpretry

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusalReasonsDocumented: every value Instrument records as
// httpretry.refusal.reason is named in RefusalReason's doc comment and in
// docs/observability.md's row for the attribute, and neither names one it
// does not record.
func TestRefusalReasonsDocumented(t *testing.T) {
	var recorded []string
	for _, v := range refusalReasons {
		recorded = append(recorded, v)
	}

	src, err := os.ReadFile("metrics.go")
	require.NoError(t, err)
	comment := regexp.MustCompile(`(?s)// RefusalReason says(.*?)\n\tRefusalReason =`).FindSubmatch(src)
	require.NotNil(t, comment, "RefusalReason's doc comment")
	var inComment []string
	for _, m := range regexp.MustCompile(`"([a-z]+)"`).FindAllSubmatch(comment[1], -1) {
		inComment = append(inComment, string(m[1]))
	}
	assert.ElementsMatch(t, recorded, inComment, "RefusalReason's doc comment")

	doc, err := os.ReadFile("../docs/observability.md")
	require.NoError(t, err)
	var row string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `httpretry.refusal.reason` |") {
			row = line
		}
	}
	require.NotEmpty(t, row, "docs/observability.md has a row for httpretry.refusal.reason")
	var inDoc []string
	for _, m := range regexp.MustCompile("`([a-z]+)`").FindAllStringSubmatch(row, -1) {
		inDoc = append(inDoc, m[1])
	}
	assert.ElementsMatch(t, recorded, inDoc, "docs/observability.md: %s", row)
}
