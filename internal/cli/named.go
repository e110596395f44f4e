package cli

import "github.com/urfave/cli/v2"

// urfave/cli's flag types answer Names by running a regular expression
// over the name at each call, and the library calls Names on every flag
// for each flag it looks up: at a run's start (its flag actions, its IsSet)
// about flags² expressions, more of the start's CPU than anything else
// before etcd is asked. named gives each flag Names computed once;
// everything else is the library's own flag, embedded, so its methods and
// the interfaces they make are unchanged. Code that needs the library's
// type asks plain.

type namedString struct {
	*cli.StringFlag
	names []string
}

type namedBool struct {
	*cli.BoolFlag
	names []string
}

type namedInt struct {
	*cli.IntFlag
	names []string
}

type namedGeneric struct {
	*cli.GenericFlag
	names []string
}

func (f *namedString) Names() []string  { return f.names }
func (f *namedBool) Names() []string    { return f.names }
func (f *namedInt) Names() []string     { return f.names }
func (f *namedGeneric) Names() []string { return f.names }

// named returns flags with each of etcdlead's kinds wrapped. The help flag
// stays the library's own: the library finds it by identity.
func named(flags []cli.Flag) []cli.Flag {
	out := make([]cli.Flag, len(flags))
	for i, f := range flags {
		switch g := f.(type) {
		case *cli.StringFlag:
			out[i] = &namedString{g, g.Names()}
		case *cli.BoolFlag:
			if f == cli.HelpFlag {
				out[i] = f
				continue
			}
			out[i] = &namedBool{g, g.Names()}
		case *cli.IntFlag:
			out[i] = &namedInt{g, g.Names()}
		case *cli.GenericFlag:
			out[i] = &namedGeneric{g, g.Names()}
		default:
			out[i] = f
		}
	}
	return out
}

// plain is the library's flag inside f.
func plain(f cli.Flag) cli.Flag {
	switch g := f.(type) {
	case *namedString:
		return g.StringFlag
	case *namedBool:
		return g.BoolFlag
	case *namedInt:
		return g.IntFlag
	case *namedGeneric:
		return g.GenericFlag
	}
	return f
}
