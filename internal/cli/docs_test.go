package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The documents, as paths from the repository's root: README.md for
// users, CONTRIBUTING.md for whoever changes etcdlead, docs/ for the rest.
// BENCHMARKS.md is written by scripts/bench, and only a link's target here.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", "CONTRIBUTING.md"}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	return files
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docLink is a link of a document: its target as written, and the line
// it starts on.
type docLink struct {
	target string
	line   int
}

var (
	linkRE = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]*)\)`)
	codeRE = regexp.MustCompile("`[^`]*`")
)

// docLinks are the inline links of a Markdown text, outside code blocks
// and code spans.
func docLinks(text string) []docLink {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
		}
	}
	// A code span may go on over a line break: blank it, keeping the
	// breaks, so that line numbers stay right.
	prose := codeRE.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, s)
	})
	var links []docLink
	for _, m := range linkRE.FindAllStringSubmatchIndex(prose, -1) {
		links = append(links, docLink{prose[m[2]:m[3]], 1 + strings.Count(prose[:m[0]], "\n")})
	}
	return links
}

// anchors are the anchors GitHub gives a document's headings: lower case,
// every character but letters, digits, '-', '_' and spaces dropped, spaces
// made '-', and a second heading of the same anchor numbered (-1, -2, ...).
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		hashes := len(l) - len(strings.TrimLeft(l, "#"))
		if fenced || hashes == 0 || hashes > 6 || !strings.HasPrefix(l[hashes:], " ") {
			continue
		}
		a := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-', r == '_', unicode.IsLetter(r), unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(l[hashes:]))
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func TestAnchors(t *testing.T) {
	got := anchors("# etcdlead\n## Once per firing: `--run-id`\n```sh\n# not a heading\n```\n" +
		"### Choosing `--ttl`, `--kill-timeout` and more\n## Notes\n## Notes\n#nope\n")
	for _, a := range []string{"etcdlead", "once-per-firing---run-id", "choosing---ttl---kill-timeout-and-more", "notes", "notes-1"} {
		if !got[a] {
			t.Errorf("no anchor %q in %v", a, got)
		}
	}
	if len(got) != 5 {
		t.Errorf("anchors %v, want 5", got)
	}
}

// Every relative link of the documents reaches a file, and every anchor a
// heading of its document, as GitHub renders them.
func TestDocLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	for _, name := range documents(t) {
		for _, l := range docLinks(readDoc(t, name)) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(l.target, "#")
			target := name
			if path != "" {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(name), path))
				if _, err := os.Stat(filepath.Join("../..", target)); err != nil {
					t.Errorf("%s:%d: %s: no such file %s", name, l.line, l.target, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: %s: an anchor into a file that is not Markdown", name, l.line, l.target)
				continue
			}
			if cache[target] == nil {
				cache[target] = anchors(readDoc(t, target))
			}
			if !cache[target][anchor] {
				t.Errorf("%s:%d: %s: %s has no heading #%s", name, l.line, l.target, target, anchor)
			}
		}
	}
}

// README.md links to every other document, so that none is found only by
// browsing the tree.
func TestReadmeLinksEveryDocument(t *testing.T) {
	linked := map[string]bool{}
	for _, l := range docLinks(readDoc(t, "README.md")) {
		path, _, _ := strings.Cut(l.target, "#")
		linked[filepath.ToSlash(filepath.Clean(path))] = true
	}
	for _, name := range documents(t) {
		if name != "README.md" && !linked[name] {
			t.Errorf("README.md has no link to %s", name)
		}
	}
}

// The test command README.md gives is the one CI runs (.ci/run's last go
// test line), word for word.
func TestReadmeGivesCITestCommand(t *testing.T) {
	var ci string
	for _, l := range strings.Split(readDoc(t, ".ci/run"), "\n") {
		if strings.HasPrefix(l, "go test ") {
			ci = strings.TrimSpace(l)
		}
	}
	if ci == "" {
		t.Fatal(".ci/run runs no go test")
	}
	readme := readDoc(t, "README.md")
	given := 0
	for _, l := range strings.Split(readme, "\n") {
		if cmd, _, _ := strings.Cut(l, "#"); strings.TrimSpace(cmd) == ci {
			given++
		}
	}
	if given == 0 {
		t.Errorf("README.md does not give CI's test command %q on a line of its own", ci)
	}
}
