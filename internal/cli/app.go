package cli

import (
	"context"
	"fmt"
	"time"

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
			runCommand(args),
			statusCommand(),
			resignCommand(),
			completionCommand(),
		},
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

func usageError(_ *cli.Context, err error, _ bool) error {
	return failf("%v: see --help", err)
}

// Main runs the command line args (args[0] is the program) and returns the
// process's exit code, after printing at most one line for the outcome.
// The caller exits with it once, so every deferred revoke and cleanup has
// run before the process ends.
func Main(args []string) int {
	err := newApp(args).RunContext(context.Background(), args)
	if msg := errorMessage(err); msg != "" {
		fmt.Fprintln(logbuf.Stderr(), "etcdlead: "+msg)
	}
	// Bounded: a stderr that never drains must not keep etcdlead from
	// exiting; the lease was revoked already.
	const exitFlush = 2 * time.Second
	logbuf.Flush(exitFlush)
	return exitCode(err)
}
