package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// designSection is the heading of docs/design.md's API table, which must
// name every top-level exported name of the root package with why it is
// there.
const designSection = "## The v1 API, name by name"

// topLevel matches the API lines of top-level names: a const, var, func or
// type, not a method, field or interface method.
var topLevel = regexp.MustCompile(`^pkg \w+, (?:const|var|func|type) (\w+)`)

// unexplained returns the top-level names among lines that the API table
// of design, the text of docs/design.md, does not name in backquotes.
func unexplained(lines []string, design string) ([]string, error) {
	_, table, ok := strings.Cut(design, designSection+"\n")
	if !ok {
		return nil, fmt.Errorf("docs/design.md has no section %q", designSection)
	}
	if i := strings.Index(table, "\n## "); i >= 0 {
		table = table[:i]
	}
	named := map[string]bool{}
	for _, code := range regexp.MustCompile("`[^`]+`").FindAllString(table, -1) {
		for _, id := range regexp.MustCompile(`\w+`).FindAllString(code, -1) {
			named[id] = true
		}
	}
	var missing []string
	for _, l := range lines {
		if m := topLevel.FindStringSubmatch(l); m != nil && !named[m[1]] && !strings.Contains(l, " struct, ") && !strings.Contains(l, " interface, ") {
			missing = append(missing, m[1])
		}
	}
	return missing, nil
}

// checkDesign reports the root's top-level names that docs/design.md's API
// table leaves out.
func checkDesign(root string, lines []string) bool {
	design, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		fatal(err)
	}
	missing, err := unexplained(lines, string(design))
	if err != nil {
		fatal(err)
	}
	for _, name := range missing {
		fmt.Fprintf(os.Stderr, "apicheck: %s is not named in docs/design.md's table %q: add it, with why\n", name, designSection)
	}
	return len(missing) == 0
}
