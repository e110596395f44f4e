package cli

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/cpuguy83/go-md2man/v2/md2man"
)

var updateMan = flag.Bool("update-man", false, "rewrite ../../etcdlead.1 from the CLI definition and README.md")

// manPath is the committed page, so that `man ./etcdlead.1` works in a
// checkout and scripts/release packages it without generating anything.
const manPath = "../../etcdlead.1"

// TestManPage fails when the committed etcdlead(1) is not the page that the
// CLI definition and README.md's tables generate today.
func TestManPage(t *testing.T) {
	got := manPage(t)
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

// manPage renders the page as urfave/cli's ToManWithSection(1) does, with
// the sections a man page reader expects after its COMMANDS: exit codes,
// signals and the child's environment taken from README.md (whose tables
// exitcode_test.go and signals/signals_test.go hold to the code), and the
// files a package installs.
func manPage(t *testing.T) []byte {
	t.Helper()
	md, err := newApp(nil).ToMarkdown()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("% etcdlead 1\n\n")
	// urfave/cli writes "[$VAR] (default: x)", which markdown would read as a
	// link to "default: x".
	b.WriteString(strings.ReplaceAll(md, " [$", ` \[$`))
	b.WriteString("\n# EXIT CODES\n\n")
	b.WriteString(readmeSection(t, "## Exit codes"))
	b.WriteString("\n# SIGNALS\n\n")
	b.WriteString(readmeSection(t, "## Signals"))
	b.WriteString("\n# ENVIRONMENT\n\n")
	b.WriteString(manEnvironment)
	b.WriteString("| option | variable |\n|---|---|\n")
	for _, row := range readmeTable(t, "## Options") {
		b.WriteString("| " + row[0] + " | " + row[1] + " |\n")
	}
	b.WriteString("\n")
	b.WriteString(readmeSection(t, "## The child"))
	b.WriteString("\n# FILES\n\n")
	b.WriteString(manFiles)
	b.WriteString("\n# SEE ALSO\n\n")
	b.WriteString(manSeeAlso)
	return md2man.Render([]byte(b.String()))
}

const manEnvironment = `Every option has an environment variable; an option on the command line
outranks its variable. The packaged systemd
unit also reads **ETCDLEAD_COMMAND**, the command that ` + "`etcdlead@NAME`" + ` runs,
and sets **ETCDLEAD_ELECTION** to the instance name.

`

const manFiles = `**/usr/libexec/etcdlead/etcdlead-keeper**
: the keeper, which owns the child's process tree and enforces the fence; a
build without a fixed directory looks for it beside the etcdlead executable
and never on PATH

**/usr/lib/systemd/system/etcdlead@.service**
: the template unit: ` + "`systemctl enable --now etcdlead@NAME`" + ` runs election NAME

**/etc/etcdlead/NAME.env**
: the settings of ` + "`etcdlead@NAME`" + `, one ETCDLEAD_* variable a line; example.env
shows them
`

const manSeeAlso = "etcdctl(1), systemd.service(5), and README.md and docs/design.md in etcdlead's source.\n"

// readmeSection returns README.md's text below heading, up to the next
// heading of its level or above.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q", heading)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i+1]
	}
	return strings.TrimLeft(rest, "\n")
}
