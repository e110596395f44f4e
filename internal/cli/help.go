package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// Flag categories, in the order help shows them.
const (
	catElection   = "Election"
	catTiming     = "Timing"
	catWhen       = "When to run (cron and scripts)"
	catOperations = "Operations"
	catOutput     = "Output"
	catConnection = "Connection"
	catLogging    = "Logging"
)

func categoryOrder() []string {
	return []string{catElection, catTiming, catWhen, catOperations, catOutput, catConnection, catLogging}
}

// helpWidth is the terminal width help fits in; helpIndent is where a
// flag's description starts.
const (
	helpWidth  = 80
	helpIndent = 30
)

// printHelp replaces urfave/cli's help templates, which print each flag on
// one line of any width and a second default beside the one in the text.
// It writes the flags grouped by category, one default each, within 80
// columns, and ends a command's help with examples and exit codes.
func printHelp(app *cli.App) func(w io.Writer, templ string, data any) {
	return func(w io.Writer, _ string, data any) {
		switch d := data.(type) {
		case *cli.App:
			writeAppHelp(w, app)
		case *cli.Command:
			writeCommandHelp(w, app, d)
		}
	}
}

func writeAppHelp(w io.Writer, app *cli.App) {
	writeWrapped(w, app.Name+" - "+app.Usage, 2)
	fmt.Fprintf(w, "\nUsage:\n  %s [connection options] COMMAND [options]\n\nCommands:\n", app.Name)
	for _, c := range app.Commands {
		if !c.Hidden {
			writeColumns(w, "  "+c.Name, firstSentence(c.Usage), 14)
		}
	}
	writeFlags(w, app, "", app.Flags)
	fmt.Fprintf(w, "\nRun '%s help COMMAND' or '%s COMMAND --help' for its options,\nexamples and exit codes.\n", app.Name, app.Name)
}

func writeCommandHelp(w io.Writer, app *cli.App, c *cli.Command) {
	writeWrapped(w, app.Name+" "+c.Name+" - "+c.Usage, 2)
	fmt.Fprintf(w, "\nUsage:\n  %s %s", app.Name, c.Name)
	if slices.ContainsFunc(c.Flags, func(f cli.Flag) bool { return f != cli.HelpFlag }) {
		fmt.Fprint(w, " [options]")
	}
	if c.ArgsUsage != "" {
		fmt.Fprint(w, " "+c.ArgsUsage)
	}
	fmt.Fprintln(w)
	if c.Description != "" {
		fmt.Fprintf(w, "\n%s\n", c.Description)
	}
	writeFlags(w, app, c.Name, c.Flags)
	if ex := commandExamples(c.Name); ex != "" {
		fmt.Fprintf(w, "\nExamples:\n%s", ex)
	}
	if codes := commandExitCodes(c.Name); codes != "" {
		fmt.Fprintf(w, "\nExit codes:\n%s", codes)
	}
}

func firstSentence(s string) string {
	before, _, _ := strings.Cut(s, " (")
	return before
}

// writeFlags writes flags by category; one without a category comes last.
func writeFlags(w io.Writer, app *cli.App, cmd string, flags []cli.Flag) {
	byCat := map[string][]cli.Flag{}
	for _, f := range flags {
		if f == cli.HelpFlag {
			continue // said once, at the end of the app's help
		}
		cat := ""
		if cf, ok := f.(cli.CategorizableFlag); ok {
			cat = cf.GetCategory()
		}
		byCat[cat] = append(byCat[cat], f)
	}
	for _, cat := range append(categoryOrder(), "") {
		fs := byCat[cat]
		if len(fs) == 0 {
			continue
		}
		title := cat
		if title == "" {
			title = "Options"
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, f := range fs {
			left, text := flagHelp(app, cmd, f)
			writeColumns(w, left, text, helpIndent)
		}
	}
}

// flagHelp is a flag's name with its value's placeholder, and its text with
// its one default and its variables.
func flagHelp(app *cli.App, cmd string, f cli.Flag) (string, string) {
	name := f.Names()[0]
	left := "  --" + name
	usage, def := "", ""
	switch f := f.(type) {
	case *cli.StringFlag:
		usage, def = f.Usage, f.Value
		if f.DefaultText != "" {
			def = f.DefaultText
		}
		left += " " + placeholder(name, "VALUE")
	case *cli.IntFlag:
		usage, def = f.Usage, fmt.Sprint(f.Value)
		left += " " + placeholder(name, "N")
	case *cli.GenericFlag:
		usage, def = f.Usage, f.Value.String()
		if f.DefaultText != "" {
			def = f.DefaultText
		}
		left += " " + placeholder(name, "DURATION")
	case *cli.BoolFlag:
		usage = f.Usage
	}
	text := usage
	if def != "" {
		text += " (default " + def + ")"
	}
	if vars := flagEnv(app, cmd, name); len(vars) > 0 {
		text += " [$" + strings.Join(vars, ", $") + "]"
	}
	return left, text
}

func flagEnv(app *cli.App, cmd, name string) []string {
	m, _ := app.Metadata[envMetadata].(map[string][]string)
	if v, ok := m[cmd+" "+name]; ok {
		return v
	}
	return m[" "+name]
}

// placeholder names what a flag's value is.
func placeholder(flag, fallback string) string {
	switch flag {
	case flagEndpoints:
		return "HOST:PORT,..."
	case flagCACert, flagCert, flagKey, flagPasswordFile:
		return "FILE"
	case flagUser:
		return "USER"
	case flagLogLevel:
		return "LEVEL"
	case flagLogFormat:
		return "FORMAT"
	case flagElection:
		return "NAME"
	case flagPrefix:
		return "PREFIX"
	case flagID:
		return "ID"
	case flagKillSignal:
		return "SIGNAL"
	case flagConflictCode:
		return "CODE"
	case flagHolders:
		return "N"
	case flagRestart:
		return "POLICY"
	case flagContainment:
		return "MODE"
	case flagStatusAddr:
		return "HOST:PORT"
	}
	return fallback
}

// writeWrapped writes text wrapped to helpWidth, its later lines indented.
func writeWrapped(w io.Writer, text string, indent int) {
	var b strings.Builder
	wrap(&b, text, 0, indent)
	fmt.Fprintln(w, b.String())
}

// writeColumns writes left, then text wrapped to helpWidth from column
// indent on; a left part too wide for its column has the text start on the
// next line.
func writeColumns(w io.Writer, left, text string, indent int) {
	var b strings.Builder
	b.WriteString(left)
	col := len(left)
	if col >= indent-1 {
		b.WriteString("\n")
		col = 0
	}
	b.WriteString(strings.Repeat(" ", indent-col))
	wrap(&b, text, indent, indent)
	fmt.Fprintln(w, b.String())
}

// wrap writes text's words to b, which stands at column col, breaking
// lines before helpWidth and indenting the later ones.
func wrap(b *strings.Builder, text string, col, indent int) {
	for i, word := range strings.Fields(text) {
		if i > 0 && col+1+len(word) > helpWidth {
			b.WriteString("\n" + strings.Repeat(" ", indent))
			col = indent
		} else if i > 0 {
			b.WriteString(" ")
			col++
		}
		b.WriteString(word)
		col += len(word)
	}
}

func commandExamples(cmd string) string {
	switch cmd {
	case "run":
		return `  etcdlead run --endpoints=10.0.0.5:2379 --election=reports -- ./report
  etcdlead run --election=nightly --once --no-wait --hold-at-least=60s \
      --conflict-exit-code=0 -- /usr/local/bin/nightly-report
  etcdlead run --restart=always --status-addr=127.0.0.1:9464 -- ./worker
`
	case "status":
		return `  etcdlead status --election=reports
  etcdlead status --json | jq -r '.elections[].leader.id'
`
	case "resign":
		return `  etcdlead resign --election=reports --id=web-1/4121
  etcdlead resign --election=reports --timeout=10s --force
`
	case "completion":
		return `  source <(etcdlead completion bash)
  etcdlead completion zsh > "${fpath[1]}/_etcdlead"
  etcdlead completion fish > ~/.config/fish/completions/etcdlead.fish
`
	}
	return ""
}

func commandExitCodes(cmd string) string {
	switch cmd {
	case "run":
		return `  N        the command's own code, or 128+N when signal N ended it
  75       not leader when --wait or --no-wait ended (--conflict-exit-code)
  76       --once: leadership was lost while the command ran
  124      --timeout: the command ran too long and was stopped
  125      etcdlead failed: options, configuration, authentication, etcd
  126/127  the command cannot be executed / was not found
`
	case "status":
		return `  0        a leader exists
  3        no leader
  125      options, configuration, etcd
`
	case "resign":
		return `  0        the leader stepped down (or its key was deleted, --force)
  3        no leader, or --id does not lead
  125      the leader did not step down within --timeout; options, etcd
`
	}
	return ""
}

// commandNames are the names `help` and completion offer.
func commandNames(app *cli.App) []string {
	var out []string
	for _, c := range app.Commands {
		if !c.Hidden && !slices.Contains(out, c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}
