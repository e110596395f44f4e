package cli

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var updateMan = flag.Bool("update-man", false, "rewrite ../../etcdlead.1 from the CLI definition and README.md")

// manPath is the committed page, so that `man ./etcdlead.1` works in a
// checkout and scripts/release packages it without generating anything.
const manPath = "../../etcdlead.1"

// TestManPage fails when the committed etcdlead(1) is not the page that the
// CLI definition and README.md's tables generate today.
func TestManPage(t *testing.T) {
	got := generatedManPage(t)
	if *updateMan {
		if err := os.WriteFile(manPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(manPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("etcdlead.1 is not the page generated from the CLI definition and README.md: regenerate it with\n\tgo test ./internal/cli -run TestManPage -update-man")
	}
}

// The committed page as groff and man read it at 80 columns: not a warning (a table
// or a line wider than the page, an unknown macro or escape), and every
// section a reader looks for.
func TestManPageLints(t *testing.T) {
	groff, man := needTool(t, "groff"), needTool(t, "man")
	page, err := filepath.Abs(manPath) // the page shipped, which TestManPage holds to the generated one
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(groff, "-man", "-ww", "-z", page).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("groff -man -ww -z etcdlead.1: %v\n%s", err, out)
	}
	cmd := exec.Command(man, "--warnings", "-l", page)
	cmd.Env = append(os.Environ(), "MANWIDTH=80")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("man --warnings -l etcdlead.1: %v\n%s", err, stderr.String())
	}
	for _, s := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS", "EXIT STATUS",
		"ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"} {
		if !bytes.Contains(stdout.Bytes(), []byte("\n"+s+"\n")) {
			t.Errorf("the page has no %s section", s)
		}
	}
	for i, l := range bytes.Split(stdout.Bytes(), []byte("\n")) {
		if n := len([]rune(string(l))); n > 80 {
			t.Errorf("line %d of the page is %d columns wide: %q", i+1, n, l)
		}
	}
}

// Every option help shows, with its placeholder, every example and every
// exit code is on the page, as the page renders them.
func TestManPageHasWhatHelpShows(t *testing.T) {
	page := string(generatedManPage(t))
	for _, topic := range []string{"", "run", "status", "resign", "completion"} {
		help := helpText(t, strings.Fields("etcdlead "+topic+" --help")...)
		section := ""
		for _, l := range strings.Split(help, "\n") {
			if strings.HasSuffix(l, ":") && !strings.HasPrefix(l, " ") {
				section = l
				continue
			}
			f := strings.Fields(l)
			var want string
			switch {
			case len(f) == 0:
				continue
			case section == "Examples:":
				want = roff(strings.TrimPrefix(l, "  "))
			case strings.HasPrefix(l, "  --") && f[0] != "--help":
				want = `\fB` + roff(f[0]) + `\fR`
				if len(f) > 1 && f[1] == strings.ToUpper(f[1]) && !strings.HasPrefix(f[1], "[$") {
					want += ` \fI` + roff(f[1]) + `\fR`
				}
			case section == "Exit codes:" && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   "):
				want = ".TP\n" + `\fB` + roff(f[0]) + `\fR` + "\n"
			default:
				continue
			}
			if !strings.Contains(page, want) {
				t.Errorf("%s --help shows %q (%s), which the page does not have as %q", topic, strings.TrimSpace(l), section, want)
			}
		}
	}
}

func generatedManPage(t *testing.T) []byte {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	page, err := manPage(newApp(nil), string(readme))
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// readmeSection returns README.md's text below heading, up to the next
// heading of its level or above.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s, err := mdSection(string(b), heading)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
