package cli

import (
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// Flag categories, in the order help shows them.
const (
	catElection   = "Election"
	catTiming     = "Timing"
	catWhen       = "When to run (cron and scripts)"
	catOperations = "Operations"
	catHealth     = "Health and eligibility"
	catOutput     = "Output"
	catConnection = "Connection"
	catLogging    = "Logging"
)

func categoryOrder() []string {
	return []string{catElection, catTiming, catWhen, catHealth, catOperations, catOutput, catConnection, catLogging}
}

// helpWidth is the terminal width help fits in.
const helpWidth = 80

// The help texts are urfave/cli templates (the app's CustomAppHelpTemplate,
// each command's CustomHelpTemplate) in etcdlead's own layout: the
// library's templates print each flag on one line of any width, beside a
// second default. flagsHelp sets the column the flags' text starts in.
const flagsHelp = `{{define "flags"}}{{$col := 30}}{{range flagGroups .}}
{{.Name}}:
{{range .Flags}}{{flagName . $col}}{{wrap (flagText .) $col}}
{{end}}{{end}}{{end}}`

const appHelp = flagsHelp + `{{wrap (printf "%s - %s" .HelpName .Usage) 2}}

Usage:
  {{.HelpName}} [connection options] COMMAND [options]

Commands:
{{$col := offsetCommands .VisibleCommands 4}}{{range .VisibleCommands}}{{$name := join .Names ", "}}  {{$name}}{{indent (subtract $col (offset $name 2)) ""}}{{wrap (firstSentence .Usage) $col}}
{{end}}{{template "flags" .VisibleFlags}}
Run '{{.HelpName}} help COMMAND' or '{{.HelpName}} COMMAND --help' for its options,
examples and exit codes.
`

// commandHelp is a command's help template: its usage, description and
// flags, then its examples and exit codes (each "" or lines that end in a
// newline), which the library has no field for.
func commandHelp(examples, exitCodes string) string {
	t := flagsHelp + `{{wrap (printf "%s - %s" .HelpName .Usage) 2}}

Usage:
  {{.HelpName}}{{if flagGroups .VisibleFlags}} [options]{{end}}{{with .ArgsUsage}} {{.}}{{end}}
{{with .Description}}
{{.}}
{{end}}{{template "flags" .VisibleFlags}}`
	if examples != "" {
		t += "\nExamples:\n" + examples
	}
	if exitCodes != "" {
		t += "\nExit codes:\n" + exitCodes
	}
	return t
}

// helpPrinter is urfave/cli's printer, wrapping at helpWidth, with the
// functions the templates add; env holds the variables detachEnv took off
// the flags.
func helpPrinter(env map[cli.Flag][]string) func(w io.Writer, templ string, data any) {
	funcs := map[string]any{
		"wrapAt":        func() int { return helpWidth },
		"firstSentence": firstSentence,
		"flagGroups":    flagGroups,
		"flagName":      flagName,
		"flagText":      func(f cli.Flag) string { return flagText(f, env[f]) },
	}
	return func(w io.Writer, templ string, data any) {
		cli.HelpPrinterCustom(w, templ, data, funcs)
	}
}

// firstSentence is a command's usage without its parenthesis, for the
// list of commands.
func firstSentence(s string) string {
	before, _, _ := strings.Cut(s, " (")
	return before
}

type flagGroup struct {
	Name  string
	Flags []cli.Flag
}

// flagGroups are the flags by category in categoryOrder, those without one
// last, under "Options"; the library's VisibleFlagCategories sorts both
// categories and flags by name. --help is left out: the app's help says it
// once, at its end.
func flagGroups(flags []cli.Flag) []flagGroup {
	var groups []flagGroup
	for _, cat := range append(categoryOrder(), "") {
		g := flagGroup{Name: cat}
		if cat == "" {
			g.Name = "Options"
		}
		for _, f := range flags {
			if cf, ok := f.(cli.CategorizableFlag); ok && cf.GetCategory() == cat && f != cli.HelpFlag {
				g.Flags = append(g.Flags, f)
			}
		}
		if len(g.Flags) > 0 {
			groups = append(groups, g)
		}
	}
	return groups
}

// flagName is a flag's name and its value's placeholder, padded to column
// col (the library has a name column only in its one-line form); a name too
// wide for the column has the text start on the next line.
func flagName(f cli.Flag, col int) string {
	s := "  --" + f.Names()[0]
	if df, ok := f.(cli.DocGenerationFlag); ok && df.TakesValue() {
		s += " " + placeholder(f)
	}
	if len(s) >= col-1 {
		return s + "\n" + strings.Repeat(" ", col)
	}
	return s + strings.Repeat(" ", col-len(s))
}

// flagText is a flag's usage with its one default and its variables; the
// library's own text would add "(default: x)" beside a default the usage
// already states, and the variables are no longer on the flag.
func flagText(f cli.Flag, env []string) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return ""
	}
	text := df.GetUsage()
	if df.TakesValue() {
		def := df.GetDefaultText()
		if s, err := strconv.Unquote(def); err == nil {
			def = s // the library quotes a string flag's default; help shows each bare
		}
		if def != "" {
			text += " (default " + def + ")"
		}
	}
	if len(env) > 0 {
		text += " [$" + strings.Join(env, ", $") + "]"
	}
	return text
}

// placeholders name the values of flags whose type does not say it.
// urfave/cli would take a placeholder from a back-quoted word of the usage,
// and these usages do not name their value.
var placeholders = map[string]string{
	flagEndpoints:    "HOST:PORT,...",
	flagCACert:       "FILE",
	flagCert:         "FILE",
	flagKey:          "FILE",
	flagPasswordFile: "FILE",
	flagUser:         "USER",
	flagLogLevel:     "LEVEL",
	flagLogFormat:    "FORMAT",
	flagElection:     "NAME",
	flagPrefix:       "PREFIX",
	flagID:           "ID",
	flagKillSignal:   "SIGNAL",
	flagConflictCode: "CODE",
	flagRestart:      "POLICY",
	flagContainment:  "MODE",
	flagStatusAddr:   "HOST:PORT",
	flagRunID:        "ID",
	flagHealthCmd:    "CMD",
	flagHealthURL:    "URL",
	flagHealthAction: "ACTION",
	flagEligibleCmd:  "CMD",
	flagNotify:       "CMD",
}

func placeholder(f cli.Flag) string {
	if p, ok := placeholders[f.Names()[0]]; ok {
		return p
	}
	switch plain(f).(type) {
	case *cli.IntFlag:
		return "N"
	case *cli.GenericFlag:
		return "DURATION" // durationFlag is the only generic flag
	}
	return "VALUE"
}
