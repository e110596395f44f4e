package cli

import (
	"context"
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

// BenchmarkRunCommandLine is what a start spends on its command line before
// the run begins: the app built, run's options parsed and checked
// (lookup.go).
func BenchmarkRunCommandLine(b *testing.B) {
	args := []string{"etcdlead", "run", "--endpoints=127.0.0.1:2379", "--election=bench", "--ttl=10s", "--", "/bin/true"}
	for b.Loop() {
		app := newApp(args)
		for _, c := range app.Commands {
			if c.Name == "run" {
				c.Action = func(c *cli.Context) error {
					_, err := parseRunConfig(c, args)
					return err
				}
			}
		}
		if err := app.RunContext(context.Background(), args); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWrappedFlagsKeepTheirNames: every flag but the help flag is wrapped,
// and answers the names urfave/cli would compute.
func TestWrappedFlagsKeepTheirNames(t *testing.T) {
	app := newApp(nil)
	check := func(cmd string, flags []cli.Flag) {
		for _, f := range flags {
			in := inner(f)
			if in == f && f != cli.HelpFlag {
				t.Errorf("%s: flag %s is not wrapped", cmd, f.Names()[0])
			}
			var want []string
			switch in := in.(type) {
			case *cli.StringFlag:
				want = cli.FlagNames(in.Name, in.Aliases)
			case *cli.BoolFlag:
				want = cli.FlagNames(in.Name, in.Aliases)
			case *cli.IntFlag:
				want = cli.FlagNames(in.Name, in.Aliases)
			case *cli.GenericFlag:
				want = cli.FlagNames(in.Name, in.Aliases)
			default:
				t.Fatalf("%s: flag %T not known to wrapFlags", cmd, in)
			}
			if !slices.Equal(f.Names(), want) {
				t.Errorf("%s: names %q, urfave/cli's %q", cmd, f.Names(), want)
			}
		}
	}
	check("etcdlead", app.Flags)
	for _, c := range app.Commands {
		check(c.Name, c.Flags)
	}
}
