package cli

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"

	"github.com/etcdlead/etcdlead/internal/logbuf"
)

// newApp builds the CLI; args are the raw arguments, which run needs to see
// where "--" stood.
func newApp(args []string) *cli.App {
	app := &cli.App{
		Name:    "etcdlead",
		Usage:   "run a command only while this process leads an election in etcd",
		Version: appVersion(),
		// The help flag explicitly: urfave/cli adds it only when no
		// command is named help.
		Flags: append(connectionFlags(), cli.HelpFlag),
		Commands: []*cli.Command{
			withLogFormat(runCommand(args)),
			withLogFormat(statusCommand()),
			withLogFormat(resignCommand()),
			withLogFormat(pauseCommand()),
			withLogFormat(resumeCommand()),
			completionCommand(),
			versionCommand(),
			helpCommand(),
			completeCommand(),
		},
		Metadata:              map[string]any{},
		CustomAppHelpTemplate: appHelp,
		// Errors come back to Main, which prints one line and returns the code.
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError:    usageError,
		HideHelpCommand: true,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return unknownCommand(c.App, c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
	}
	app.Flags = named(app.Flags)
	for _, c := range app.Commands {
		// No `etcdlead run help`: after run, words are the command's.
		c.HideHelpCommand = true
		c.Flags = named(c.Flags)
	}
	cli.HelpPrinter = helpPrinter(detachEnv(app))
	return app
}

// metaLogJSON marks in App.Metadata that the command's logs are JSON, so
// that Main's last line is JSON too.
const metaLogJSON = "log-json"

// withLogFormat notes the command's --log-format once its flags are
// parsed; a command line that does not parse gets a plain last line.
func withLogFormat(cmd *cli.Command) *cli.Command {
	cmd.Before = func(c *cli.Context) error {
		c.App.Metadata[metaLogJSON] = optString(c, flagLogFormat) == "json"
		return nil
	}
	return cmd
}

// printEnd prints the one line of the outcome: plain, or as a JSON record
// like every other line when the logs are JSON.
func printEnd(app *cli.App, msg string) {
	if json, _ := app.Metadata[metaLogJSON].(bool); json {
		logbuf.Logger(hclog.LoggerOptions{Name: "etcdlead", JSONFormat: true}).Error(msg)
		return
	}
	fmt.Fprintln(logbuf.Stderr(), "etcdlead: "+msg)
}

// versionCommand prints what --version prints, through the same printer.
func versionCommand() *cli.Command {
	return &cli.Command{
		Name:               "version",
		Usage:              "print the version, as --version does",
		CustomHelpTemplate: commandHelp("", ""),
		Action: func(c *cli.Context) error {
			cli.ShowVersion(c)
			return nil
		},
	}
}

// helpCommand is `etcdlead help [COMMAND]`, the same text as --help.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:               "help",
		Usage:              "show help for etcdlead or for one command",
		ArgsUsage:          "[COMMAND]",
		CustomHelpTemplate: commandHelp("", ""),
		Action: func(c *cli.Context) error {
			name := c.Args().First()
			if name == "" {
				return cli.ShowAppHelp(c)
			}
			// The library would show a hidden command's help too.
			if findCommand(c.App, name) == nil {
				return unknownCommand(c.App, name)
			}
			return cli.ShowCommandHelp(c, name)
		},
	}
}

// commandNames are the names `help` and completion offer.
func commandNames(app *cli.App) []string {
	var out []string
	for _, c := range app.VisibleCommands() {
		out = append(out, c.Name)
	}
	return out
}

func unknownCommand(app *cli.App, name string) error {
	if s := suggest(name, commandNames(app)); s != "" {
		return failf("unknown command %q: did you mean %s? see etcdlead --help", name, s)
	}
	return failf("unknown command %q: use one of %s; see etcdlead --help", name, strings.Join(commandNames(app), ", "))
}

// badValue is how package flag words a value its Set refused. The words
// are all there is: package flag returns a bad command line as text alone,
// and urfave/cli passes it on as it is. It and undefinedFlag are compiled
// on first use: only a bad command line needs them.
var badValue = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^invalid value "(.*)" for flag -([\w-]+): (.*)$`)
})

// undefinedFlag is how package flag words an option it does not know.
var undefinedFlag = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
})

func usageError(c *cli.Context, err error, _ bool) error {
	if m := badValue().FindStringSubmatch(err.Error()); m != nil {
		return failf("--%s %q %s", m[2], m[1], m[3])
	}
	if m := undefinedFlag().FindStringSubmatch(err.Error()); m != nil {
		flags := c.App.Flags
		if c.Command != nil && c.Command.Name != c.App.Name && len(c.Command.Flags) > 0 {
			flags = c.Command.Flags
		}
		var names []string
		for _, f := range flags {
			names = append(names, f.Names()[0])
		}
		if s := suggest(m[1], names); s != "" {
			return failf("unknown option --%s: did you mean --%s? see --help", m[1], s)
		}
		return failf("unknown option --%s: see --help", m[1])
	}
	return failf("%v: see --help", err)
}

// suggest is the name closest to a misspelt one: one it is a prefix of
// (--endpoint for --endpoints), else one a few edits away (one per three
// letters typed, at most two); "" when none is close or two are equally
// close. urfave/cli's App.Suggest would name the nearest however far.
func suggest(typed string, names []string) string {
	best, bestD, tie := "", min(max(1, len(typed)/3), 2)+1, false
	for _, n := range names {
		d := editDistance(typed, n)
		if len(typed) >= 3 && strings.HasPrefix(n, typed) {
			d = min(d, 1)
		}
		switch {
		case d < bestD:
			best, bestD, tie = n, d, false
		case d == bestD:
			tie = true
		}
	}
	if tie || best == "" {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Main runs the command line args (args[0] is the program) and returns the
// process's exit code, after printing at most one line for the outcome.
// The caller exits with it once, so every deferred revoke and cleanup has
// run before the process ends.
func Main(args []string) int {
	app := newApp(args)
	err := app.RunContext(context.Background(), args)
	if msg := errorMessage(err); msg != "" {
		printEnd(app, msg)
	}
	// Bounded: a stderr that never drains must not keep etcdlead from
	// exiting; the lease was revoked already.
	const exitFlush = 2 * time.Second
	logbuf.Flush(exitFlush)
	return exitCode(err)
}
