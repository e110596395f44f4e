package cli

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// etcdlead(1) is written from what --help shows: the commands, their
// usage and descriptions, the flags by category with their placeholders,
// defaults and variables (flagGroups, placeholder, flagText), and each
// command's examples and exit codes, read back from the help template
// commandHelp made of them; so the page and help cannot disagree. What
// help has no place for (the signals and the child's environment) comes
// from README.md's tables, which exitcode_test.go and
// signals/signals_test.go hold to the code. The page is roff of the man
// macros with no tables, so it fits 80 columns.

// manDescription is the page's DESCRIPTION, below the run command's own:
// paragraphs between blank lines.
const manDescription = `Every candidate of an election runs the same command line on its own
machine; etcd queues them, and only the one at the head of the queue runs
COMMAND. When its lease ends (a crash, a partition, a stop) the next in
line takes over, but only once the old command is known dead: each child
runs under a keeper that kills its whole process tree by a deadline the
lease guarantees, so two copies of COMMAND never run at once, and no
descendant of a stopped command is left behind.

Logs go to stderr; stdout is the command's alone. A run that makes losing no
error (--conflict-exit-code=0 with --no-wait or --wait) keeps its log lines
back: a candidate that loses drops them, and with --once so does a winner
whose run exits 0, so a cron line mails only a failure, and then the whole
story. A warning is written when it happens; on a terminal a winner's lines
come as they are logged.`

// manFiles are the files a package installs.
var manFiles = [][2]string{
	{"/usr/libexec/etcdlead/etcdlead-keeper", "the keeper, which owns the child's process tree and enforces the fence; a build without a fixed directory looks for it beside the etcdlead executable and never on PATH"},
	{"/usr/lib/systemd/system/etcdlead@.service", "the template unit: `systemctl enable --now etcdlead@NAME` runs election NAME"},
	{"/etc/etcdlead/NAME.env", "the settings of `etcdlead@NAME`, one ETCDLEAD_* variable a line; example.env shows them"},
}

const manSeeAlso = `\fBetcdctl\fR(1), \fBflock\fR(1), \fBtimeout\fR(1), \fBsystemd.service\fR(5), \fBcrontab\fR(5); README.md and docs/design.md in etcdlead's source.`

// manPage renders etcdlead(1) for app (as newApp builds it) and readme
// (README.md's text).
func manPage(app *cli.App, readme string) ([]byte, error) {
	app.Setup() // the flags the library adds when it runs, --version
	env, _ := app.Metadata[envMetadata].(map[cli.Flag][]string)
	m := &manWriter{app: app, env: env, readme: readme}
	m.line(`.TH ETCDLEAD 1 "" etcdlead "User Commands"`)
	m.line(".nh")   // no hyphenation: option names and words stay whole
	m.line(".ad l") // ragged right, no stretched spaces
	m.section("NAME")
	m.line(roff(app.Name) + ` \- ` + roff(app.Usage))
	for _, write := range []func() error{m.synopsis, m.description, m.commands, m.options,
		m.exitStatus, m.signals, m.environment, m.files, m.examples} {
		if err := write(); err != nil {
			return nil, err
		}
	}
	m.section("SEE ALSO")
	m.line(manSeeAlso)
	return m.b.Bytes(), nil
}

func (m *manWriter) synopsis() error {
	m.section("SYNOPSIS")
	for i, c := range m.app.VisibleCommands() {
		if i > 0 {
			m.line(".br")
		}
		m.line(".B " + roff(m.app.Name))
		m.line(`.RI [ "connection options" ]`)
		s := `\fB` + roff(c.Name) + `\fR`
		if len(flagGroups(c.VisibleFlags())) > 0 {
			s += ` [\fIoptions\fR]`
		}
		m.line(s + optional(" ", roff(c.ArgsUsage)))
	}
	return nil
}

func (m *manWriter) description() error {
	m.section("DESCRIPTION")
	run := findCommand(m.app, "run")
	if run == nil {
		return fmt.Errorf("no run command")
	}
	m.para(run.Description)
	for _, p := range strings.Split(manDescription, "\n\n") {
		m.para(p)
	}
	return nil
}

// commands lists each command with its usage and, but for run's, which
// DESCRIPTION holds, its description.
func (m *manWriter) commands() error {
	m.section("COMMANDS")
	for _, c := range m.app.VisibleCommands() {
		m.item(`\fB`+roff(c.Name)+`\fR`+optional(" ", roff(c.ArgsUsage)), c.Usage+".")
		if c.Description != "" && c.Name != "run" {
			m.line(".IP")
			m.para1(c.Description)
		}
	}
	return nil
}

// options are the app's options by category, then each command's own by
// category; a connection option a command repeats is the app's.
func (m *manWriter) options() error {
	m.section("OPTIONS")
	m.para(`Every option can be given by its environment variable, named after it; an option on the command line wins over its variable. Durations take a unit (15s, 1m30s) or a plain number of seconds. Connection and logging options are accepted before the command and after it.`)
	global := map[string]bool{}
	for _, g := range flagGroups(m.app.VisibleFlags()) {
		m.subsection(g.Name)
		for _, f := range g.Flags {
			global[f.Names()[0]] = true
			m.flag(f)
		}
	}
	for _, c := range m.app.VisibleCommands() {
		for _, g := range flagGroups(c.VisibleFlags()) {
			var own []cli.Flag
			for _, f := range g.Flags {
				if !global[f.Names()[0]] {
					own = append(own, f)
				}
			}
			if len(own) > 0 {
				m.subsection(c.Name + ": " + g.Name)
			}
			for _, f := range own {
				m.flag(f)
			}
		}
	}
	return nil
}

func (m *manWriter) exitStatus() error {
	m.section("EXIT STATUS")
	for _, c := range m.app.VisibleCommands() {
		if _, codes := helpExtras(c); codes != "" {
			m.subsection(c.Name)
			for _, row := range columns(codes) {
				m.item(`\fB`+roff(row[0])+`\fR`, row[1])
			}
		}
	}
	return nil
}

func (m *manWriter) signals() error {
	m.section("SIGNALS")
	m.para("What etcdlead run does on a signal:")
	return m.readmeTable("## Signals")
}

// environment lists the options' variables, one a line, then the others
// etcdlead reads, then what the child gets.
func (m *manWriter) environment() error {
	m.section("ENVIRONMENT")
	m.para("Each option's variables, which OPTIONS describes:")
	m.line(".PD 0") // one line each, a list to look a name up in
	seen := map[string]bool{}
	for _, c := range append([]*cli.Command{{Flags: m.app.VisibleFlags()}}, m.app.VisibleCommands()...) {
		for _, f := range c.VisibleFlags() {
			for _, v := range m.env[f] {
				if !seen[v] {
					seen[v] = true
					m.line(".TP 36") // the longest name and a space
					m.line(`\fB` + roff(v) + `\fR`)
					m.line(`\fB\-\-` + roff(f.Names()[0]) + `\fR`)
				}
			}
		}
	}
	m.line(".PD")
	m.para("etcdlead also reads:")
	m.itemRoff(`\fB`+roff(envPassword)+`\fR, \fB`+roff(envEtcdctlPassword)+`\fR`,
		roff("the etcd password when --password-file is not given, in this order; never logged, never given to the child"))
	m.itemRoff(`\fBETCDLEAD_COMMAND\fR`, roff("the command etcdlead@NAME runs (the packaged systemd unit), which sets ETCDLEAD_ELECTION to NAME"))
	child, err := mdSection(m.readme, "## The child")
	if err != nil {
		return err
	}
	intro, _, _ := strings.Cut(child, "\n\n")
	m.line(".PP")
	m.line(md(intro))
	return m.readmeTable("## The child")
}

func (m *manWriter) files() error {
	m.section("FILES")
	for _, f := range manFiles {
		m.itemRoff(`\fI`+roff(f[0])+`\fR`, md(f[1]))
	}
	return nil
}

// examples are each command's, as help shows them, one a line.
func (m *manWriter) examples() error {
	m.section("EXAMPLES")
	for _, c := range m.app.VisibleCommands() {
		examples, _ := helpExtras(c)
		if examples == "" {
			continue
		}
		m.line(".PP")
		m.line(`\fB` + roff(c.Name) + `\fR:`)
		m.line(".PP")
		m.line(".RS 2")
		m.line(".nf")
		for _, l := range strings.Split(strings.TrimRight(examples, "\n"), "\n") {
			m.line(roff(strings.TrimPrefix(l, "  ")))
		}
		m.line(".fi")
		m.line(".RE")
	}
	return nil
}

// readmeTable writes the rows of README.md's first table under heading as
// tagged paragraphs.
func (m *manWriter) readmeTable(heading string) error {
	rows, err := mdTable(m.readme, heading)
	if err != nil {
		return err
	}
	for _, r := range rows {
		m.itemRoff(md(r[0]), md(r[1]))
	}
	return nil
}

// helpExtras reads a command's examples and exit codes back from the help
// template commandHelp built.
func helpExtras(c *cli.Command) (examples, exitCodes string) {
	t := c.CustomHelpTemplate
	t, exitCodes, _ = strings.Cut(t, "\nExit codes:\n")
	_, examples, _ = strings.Cut(t, "\nExamples:\n")
	return examples, exitCodes
}

// columns splits help's two-column lines ("  75       text", text going on
// on lines indented further) into their first word and their text.
func columns(s string) [][2]string {
	var rows [][2]string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		first, rest, _ := strings.Cut(strings.TrimSpace(l), " ")
		if strings.HasPrefix(l, "    ") && len(rows) > 0 {
			rows[len(rows)-1][1] += " " + strings.TrimSpace(l)
			continue
		}
		rows = append(rows, [2]string{first, strings.TrimSpace(rest)})
	}
	return rows
}

// manWriter writes the page of app, whose flags' variables are env.
type manWriter struct {
	app    *cli.App
	env    map[cli.Flag][]string
	readme string
	b      bytes.Buffer
}

// line writes a line of roff as it is.
func (m *manWriter) line(s string) { m.b.WriteString(s + "\n") }

func (m *manWriter) section(name string) { m.line(".SH " + name) }

func (m *manWriter) subsection(name string) { m.line(`.SS "` + roff(name) + `"`) }

// para is a paragraph of plain text; help's line breaks are not the page's.
func (m *manWriter) para(s string) {
	m.line(".PP")
	m.para1(s)
}

func (m *manWriter) para1(s string) { m.line(roff(strings.Join(strings.Fields(s), " "))) }

// item is a tagged paragraph: tag is roff, text plain.
func (m *manWriter) item(tag, text string) {
	m.itemRoff(tag, roff(strings.Join(strings.Fields(text), " ")))
}

func (m *manWriter) itemRoff(tag, text string) {
	m.line(".TP")
	m.line(tag)
	m.line(text)
}

// flag is one option as help shows it: its name and placeholder, its
// text and default (flagText), its variables.
func (m *manWriter) flag(f cli.Flag) {
	env := m.env[f]
	tag := `\fB\-\-` + roff(f.Names()[0]) + `\fR`
	if df, ok := f.(cli.DocGenerationFlag); ok && df.TakesValue() {
		tag += ` \fI` + roff(placeholder(f)) + `\fR`
	}
	text := roff(flagText(f, nil))
	if len(env) > 0 {
		var vs []string
		for _, v := range env {
			vs = append(vs, `\fB`+roff(v)+`\fR`)
		}
		text += "\n.br\nVariable" + map[bool]string{true: "s", false: ""}[len(vs) > 1] + ": " + strings.Join(vs, ", ")
	}
	m.itemRoff(tag, text)
}

func optional(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

// roff escapes plain text for a line of roff: backslashes, hyphens (which
// the page means as the minus of options and commands) and a control
// character at the line's start.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// md turns the little markdown of README.md's table cells and paragraphs
// into roff: code and strong as bold, links as their text. Its expressions
// are compiled here, not at the package's initialisation, which every start
// of etcdlead would pay for a page only the tests write.
func md(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = regexp.MustCompile(`\[([^]]*)\]\([^)]*\)`).ReplaceAllString(s, "$1")
	s = roff(s)
	s = regexp.MustCompile("`([^`]*)`").ReplaceAllString(s, `\fB$1\fR`)
	return regexp.MustCompile(`\*\*([^*]*)\*\*`).ReplaceAllString(s, `\fB$1\fR`)
}

// mdSection is README.md's text below heading, up to the next heading of
// its level or above.
func mdSection(readme, heading string) (string, error) {
	_, rest, ok := strings.Cut(readme, "\n"+heading+"\n")
	if !ok {
		return "", fmt.Errorf("README.md has no %q", heading)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i+1]
	}
	return strings.TrimLeft(rest, "\n"), nil
}

// mdTable is the rows of the first table below heading, without its
// header.
func mdTable(readme, heading string) ([][]string, error) {
	sec, err := mdSection(readme, heading)
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	if len(rows) < 3 {
		return nil, fmt.Errorf("README.md: no table under %q", heading)
	}
	return rows[2:], nil
}
