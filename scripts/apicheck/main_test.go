package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestAPIOf(t *testing.T) {
	dir := t.TempDir()
	src := `package p

type State int

const (
	Closed State = iota
	Open
)

const Max = 4

var ErrX error

type Budget interface {
	Allow(timeout bool) bool
}

type T struct {
	A int
	b int
	Fn func(p *T) error
}

func (t *T) Do(x, y int) (n int, err error) { return 0, nil }
func (t *T) hidden()                          {}
func New(name string) *T                      { return nil }
func unexported()                             {}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\nfunc TestHidden() {}\n"), 0o644)
	name, lines, err := apiOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pkg p, const Closed State = 0",
		"pkg p, const Max = 4",
		"pkg p, const Open State = 1",
		"pkg p, func New(string) *T",
		"pkg p, method (*T) Do(int, int) (int, error)",
		"pkg p, type Budget interface",
		"pkg p, type Budget interface, Allow(bool) bool",
		"pkg p, type State int",
		"pkg p, type T struct",
		"pkg p, type T struct, A int",
		"pkg p, type T struct, Fn func(p *T) error",
		"pkg p, var ErrX error",
	}
	if name != "p" || !slices.Equal(lines, want) {
		t.Errorf("apiOf = %s\n%q\nwant\n%q", name, lines, want)
	}
}

func TestDiff(t *testing.T) {
	added, removed := diff([]string{"a", "b"}, []string{"b", "c"})
	if !slices.Equal(added, []string{"c"}) || !slices.Equal(removed, []string{"a"}) {
		t.Errorf("diff = %q, %q", added, removed)
	}
}

func TestMethodOfOldInterface(t *testing.T) {
	old := []string{"pkg p, type Budget interface", "pkg p, type Budget interface, Allow(bool) bool"}
	for l, want := range map[string]bool{
		"pkg p, type Budget interface, Level() (float64, float64)": true,  // breaks implementations
		"pkg p, type Option interface, apply(*config)":             false, // a new interface
		"pkg p, type Option interface":                             false,
		"pkg p, func New(string) *T":                               false,
	} {
		if got := methodOfOldInterface(l, old); got != want {
			t.Errorf("methodOfOldInterface(%q) = %v, want %v", l, got, want)
		}
	}
}

func TestUnexplained(t *testing.T) {
	lines := []string{
		"pkg p, const Open State = 1",
		"pkg p, func New(string) *T",
		"pkg p, method (*T) Do(int, int) (int, error)",
		"pkg p, type T struct",
		"pkg p, type T struct, A int",
		"pkg p, var ErrX error",
	}
	design := "# d\n\n" + designSection + "\n\n| name | why |\n|---|---|\n| `T{A}`, `New` | ... |\n| `ErrX`, but Open outside backquotes | ... |\n\n## After\n\n`Open`\n"
	missing, err := unexplained(lines, design)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(missing, []string{"Open"}) {
		t.Errorf("unexplained = %q, want [Open]: a name outside the section or outside backquotes is not named", missing)
	}
	if _, err := unexplained(lines, "# no table\n"); err == nil {
		t.Error("a design without the section: no error")
	}
}
