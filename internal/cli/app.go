package cli

import (
	"context"
	"fmt"
	"regexp"
	"runtime/debug"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/etcdlead/etcdlead/internal/logbuf"
)

// version is set at build time with -ldflags "-X main.version=..."; else the
// module version from the build info is used.
var version = ""

func appVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

// newApp builds the CLI; args are the raw arguments, which run needs to see
// where "--" stood.
func newApp(args []string) *cli.App {
	app := &cli.App{
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
	detachEnv(app)
	return app
}

// badValue is how package flag words a value its Set refused.
var badValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([\w-]+): (.*)$`)

func usageError(_ *cli.Context, err error, _ bool) error {
	if m := badValue.FindStringSubmatch(err.Error()); m != nil {
		return failf("--%s %q %s", m[2], m[1], m[3])
	}
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
