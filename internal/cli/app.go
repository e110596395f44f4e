package cli

import (
	"runtime/debug"

	"github.com/urfave/cli/v2"
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
		// Errors come back to realMain, which prints one line and exits once.
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

func runCommand(raw []string) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "campaign for leadership and run COMMAND while leading",
		ArgsUsage: "-- COMMAND [ARGS...]",
		Description: "Campaigns in etcd and starts COMMAND once this process leads. The command is\n" +
			"stopped the moment leadership is lost, and etcdlead campaigns again. It exits\n" +
			"with the command's status when the command ends by itself.",
		Flags:        runFlags(),
		OnUsageError: usageError,
		Action:       func(c *cli.Context) error { return runAction(c, raw) },
	}
}
