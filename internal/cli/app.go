package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"

	"github.com/etcdlead/etcdlead/internal/logbuf"
)

// newApp builds the CLI; args are the raw arguments, which run needs to see
// where "--" stood.
func newApp(args []string) *cli.App {
	return &cli.App{
		Name:    "etcdlead",
		Usage:   "run a command only while this process leads an election in etcd",
		Version: appVersion(),
		Flags:   connectionFlags(),
		Commands: []*cli.Command{
			withLogFormat(runCommand(args)),
			withLogFormat(statusCommand()),
			withLogFormat(resignCommand()),
			completionCommand(),
		},
		Metadata:             map[string]any{},
		EnableBashCompletion: true,
		// Errors come back to Main, which prints one line and returns the code.
		ExitErrHandler:  func(*cli.Context, error) {},
		OnUsageError:    usageError,
		HideHelpCommand: true,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return failf("unknown command %q: see etcdlead --help", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
	}
}

// metaLogJSON marks in App.Metadata that the command's logs are JSON, so
// that Main's last line is JSON too.
const metaLogJSON = "log-json"

// withLogFormat notes the command's --log-format once its flags are
// parsed; a command line that does not parse gets a plain last line.
func withLogFormat(cmd *cli.Command) *cli.Command {
	cmd.Before = func(c *cli.Context) error {
		c.App.Metadata[metaLogJSON] = pick(c, flagLogFormat).String(flagLogFormat) == "json"
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

func usageError(_ *cli.Context, err error, _ bool) error {
	return failf("%v: see --help", err)
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
