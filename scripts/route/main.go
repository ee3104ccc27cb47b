// Route counts the files of the root package that one GET runs through:
// a 503 and then a 200 with the default policy, after a warm-up GET
// (TestRoute). It takes a coverage profile of the test twice, once
// stopping after the warm-up, and lists every root file with a block the
// traced GET ran (a block the full run ran more often than the warm-up),
// with how many.
//
//	go run ./scripts/route
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	dir, err := os.MkdirTemp("", "route")
	check(err)
	defer os.RemoveAll(dir)
	full, warm := filepath.Join(dir, "full.out"), filepath.Join(dir, "warm.out")
	profile(full, "")
	profile(warm, "warm-up")
	before := counts(warm)
	blocks := map[string]int{}
	for block, n := range counts(full) {
		if n <= before[block] {
			continue
		}
		file := block[:strings.LastIndex(block, ":")]
		rel, ok := strings.CutPrefix(file, "github.com/seedhq/httpretry/")
		if !ok || strings.Contains(rel, "/") {
			continue // another package: the root's files only
		}
		blocks[rel]++
	}
	var files []string
	for f := range blocks {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		fmt.Printf("%-16s %3d blocks\n", f, blocks[f])
	}
	fmt.Printf("%d root files\n", len(files))
}

// profile runs TestRoute with HTTPRETRY_ROUTE=route into a coverage
// profile at path.
func profile(path, route string) {
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestRoute$", "-covermode=count", "-coverprofile="+path, ".")
	cmd.Env = append(os.Environ(), "HTTPRETRY_ROUTE="+route)
	cmd.Stderr = os.Stderr
	check(cmd.Run())
}

// counts reads a profile: how often each block ran.
func counts(path string) map[string]int {
	f, err := os.Open(path)
	check(err)
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || strings.HasPrefix(fields[0], "mode:") {
			continue
		}
		n, err := strconv.Atoi(fields[2])
		check(err)
		out[fields[0]] += n
	}
	check(sc.Err())
	return out
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "route:", err)
		os.Exit(1)
	}
}
