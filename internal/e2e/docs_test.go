package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docSection returns the text of the document name (a path from the
// repository's root: README.md, docs/security.md) below heading, a whole
// line with its #s, up to the next heading of its level or above.
func docSection(t *testing.T, name, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", name))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q", name, heading)
	}
	level := len(heading) - len(strings.TrimLeft(heading, "#"))
	fenced := false
	lines := strings.Split(rest, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
		}
		if n := len(l) - len(strings.TrimLeft(l, "#")); !fenced && n > 0 && n <= level && strings.HasPrefix(l[n:], " ") {
			return strings.Join(lines[:i], "\n")
		}
	}
	return rest
}

// docBlock returns the first ```sh block of the document name below
// heading, within its section.
func docBlock(t *testing.T, name, heading string) string {
	t.Helper()
	_, after, ok := strings.Cut(docSection(t, name, heading), "\n```sh\n")
	block, _, ok2 := strings.Cut(after, "\n```\n")
	if !ok || !ok2 {
		t.Fatalf("%s: no sh block under %q", name, heading)
	}
	return block
}
