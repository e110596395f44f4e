package cli

import "github.com/urfave/cli/v2"

// urfave/cli computes a flag's names with a regular expression at each call
// of Names, and parsing a command looks every flag up by name in a loop over
// all of them: with run's thirty options that came to more than the rest of
// the command line's handling, on the way to the first child. Its Setup also
// formats every flag of every command to group them by category, for help
// templates that printHelp replaces. So each flag is wrapped: its names
// computed once, its category kept from urfave/cli (help.go reads it
// through inner). Wrapping changes no value and no parse.

type (
	stringFlag struct {
		*cli.StringFlag
		names []string
	}
	boolFlag struct {
		*cli.BoolFlag
		names []string
	}
	intFlag struct {
		*cli.IntFlag
		names []string
	}
	genericFlag struct {
		*cli.GenericFlag
		names []string
	}
)

func (f stringFlag) Names() []string  { return f.names }
func (f boolFlag) Names() []string    { return f.names }
func (f intFlag) Names() []string     { return f.names }
func (f genericFlag) Names() []string { return f.names }

func (stringFlag) GetCategory() string  { return "" }
func (boolFlag) GetCategory() string    { return "" }
func (intFlag) GetCategory() string     { return "" }
func (genericFlag) GetCategory() string { return "" }

// wrapFlags wraps every flag of the app and its commands but the help flag,
// which urfave/cli knows by identity.
func wrapFlags(app *cli.App) {
	wrap := func(flags []cli.Flag) {
		for i, f := range flags {
			switch f := f.(type) {
			case *cli.StringFlag:
				flags[i] = stringFlag{f, names(f.Name, f.Aliases)}
			case *cli.BoolFlag:
				if f != cli.HelpFlag {
					flags[i] = boolFlag{f, names(f.Name, f.Aliases)}
				}
			case *cli.IntFlag:
				flags[i] = intFlag{f, names(f.Name, f.Aliases)}
			case *cli.GenericFlag:
				flags[i] = genericFlag{f, names(f.Name, f.Aliases)}
			}
		}
	}
	wrap(app.Flags)
	for _, cmd := range app.Commands {
		wrap(cmd.Flags)
	}
}

// names is what urfave/cli's Names answers for etcdlead's flags, whose
// names hold no comma or space for its expression to cut off.
func names(name string, aliases []string) []string {
	return append([]string{name}, aliases...)
}

// inner is the flag as defined, for code that reads its fields.
func inner(f cli.Flag) cli.Flag {
	switch f := f.(type) {
	case stringFlag:
		return f.StringFlag
	case boolFlag:
		return f.BoolFlag
	case intFlag:
		return f.IntFlag
	case genericFlag:
		return f.GenericFlag
	}
	return f
}
