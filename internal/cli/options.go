package cli

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// etcdlead reads the flags' variables itself rather than through
// urfave/cli, which parses every variable before the command line: a bad
// ETCDLEAD_TTL would then fail a run that gives --ttl, and a variable could
// not lose to a flag it contradicts. The flags keep their EnvVars in their
// definitions (help shows them); detachEnv moves them out of urfave/cli's
// reach into the app's metadata, where given finds them.

const envMetadata = "etcdlead.env"

// detachEnv moves every flag's variables into app.Metadata, keyed by the
// flag: the same flag name may have variables in one command and none in
// another (resign --timeout). It returns the map, which help shows.
func detachEnv(app *cli.App) map[cli.Flag][]string {
	m := map[cli.Flag][]string{}
	take := func(flags []cli.Flag) {
		for _, f := range flags {
			switch g := plain(f).(type) {
			case *cli.StringFlag:
				m[f], g.EnvVars = g.EnvVars, nil
			case *cli.BoolFlag:
				m[f], g.EnvVars = g.EnvVars, nil
			case *cli.IntFlag:
				m[f], g.EnvVars = g.EnvVars, nil
			case *cli.GenericFlag:
				m[f], g.EnvVars = g.EnvVars, nil
			}
		}
	}
	take(app.Flags)
	for _, cmd := range app.Commands {
		take(cmd.Flags)
	}
	if app.Metadata == nil {
		app.Metadata = map[string]any{}
	}
	app.Metadata[envMetadata] = m
	return m
}

// envVars are the variables of flag name in c's command, else in the
// app's flags.
func envVars(c *cli.Context, name string) []string {
	m, _ := c.App.Metadata[envMetadata].(map[cli.Flag][]string)
	var flags []cli.Flag
	if c.Command != nil {
		flags = c.Command.Flags
	}
	for _, fs := range [][]cli.Flag{flags, c.App.Flags} {
		for _, f := range fs {
			if f.Names()[0] == name {
				return m[f]
			}
		}
	}
	return nil
}

// source is where an option's value came from; a higher one wins.
type source int

const (
	fromDefault source = iota
	fromEnv
	fromFlag
)

// given finds where option name was given: on the command line (the
// innermost context that has it, so a connection flag after the subcommand
// wins over one before it), else the first of its variables that is set
// and not empty. ctx is the context to read a flag from; env and val name
// the variable.
func given(c *cli.Context, name string) (src source, ctx *cli.Context, env, val string) {
	for _, x := range c.Lineage() {
		if x.IsSet(name) {
			return fromFlag, x, "", ""
		}
	}
	for _, v := range envVars(c, name) {
		if s := os.Getenv(v); s != "" {
			return fromEnv, nil, v, s
		}
	}
	return fromDefault, c, "", ""
}

func originOf(c *cli.Context, name string) source {
	src, _, _, _ := given(c, name)
	return src
}

// envError words a variable's bad value like a bad flag's.
func envError(env, val string, err error) error {
	return fmt.Errorf("%s=%q %v", env, val, err)
}

func optString(c *cli.Context, name string) string {
	src, x, _, val := given(c, name)
	if src == fromEnv {
		return val
	}
	return x.String(name)
}

// optText reads a string option whose empty value would stand for
// something else: a default, or one derived from the command. Given empty,
// on the command line or in the first of its variables that is set, it is
// refused, since `--election="$UNSET"` would otherwise silently join the
// default's election; only an option left out takes its default. give is
// what to give instead; absent, what leaving the option out means, or ""
// when it cannot be left out.
func optText(c *cli.Context, name, give, absent string) (string, error) {
	fix := func(leave string) string {
		if absent == "" {
			return "give " + give
		}
		return "give " + give + ", or " + leave + " " + absent
	}
	for _, x := range c.Lineage() {
		if x.IsSet(name) {
			if v := x.String(name); v != "" {
				return v, nil
			}
			return "", fmt.Errorf("--%s is empty: %s", name, fix("leave --"+name+" out"))
		}
	}
	for _, v := range envVars(c, name) {
		if s, ok := os.LookupEnv(v); ok {
			if s != "" {
				return s, nil
			}
			return "", fmt.Errorf("%s is set but empty: %s", v, fix("unset it"))
		}
	}
	return c.String(name), nil
}

func optBool(c *cli.Context, name string) (bool, error) {
	src, x, env, val := given(c, name)
	if src != fromEnv {
		return x.Bool(name), nil
	}
	b, err := strconv.ParseBool(val)
	if err != nil {
		return false, envError(env, val, fmt.Errorf("is not a boolean: use true or false"))
	}
	return b, nil
}

func optInt(c *cli.Context, name string) (int, error) {
	src, x, env, val := given(c, name)
	if src != fromEnv {
		return x.Int(name), nil
	}
	n, err := strconv.Atoi(val)
	if err != nil {
		return 0, envError(env, val, fmt.Errorf("is not a whole number"))
	}
	return n, nil
}

// optDuration returns a duration option and whether it was given at all.
func optDuration(c *cli.Context, name string) (time.Duration, bool, error) {
	src, x, env, val := given(c, name)
	switch src {
	case fromEnv:
		d, err := parseDuration(val)
		if err != nil {
			return 0, true, envError(env, val, err)
		}
		return d, true, nil
	case fromFlag:
		return x.Generic(name).(*durationValue).d, true, nil
	}
	if v, ok := c.Generic(name).(*durationValue); ok {
		return v.d, false, nil
	}
	return 0, false, nil
}

// durationValue is a duration flag that also takes a plain number as
// seconds (--ttl 15), as etcdctl's flags and lease commands do.
type durationValue struct{ d time.Duration }

func durationFlag(f cli.GenericFlag, def time.Duration) *cli.GenericFlag {
	f.Value = &durationValue{def}
	return &f
}

func (v *durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	v.d = d
	return nil
}

func (v *durationValue) String() string {
	if v == nil || v.d == 0 {
		return ""
	}
	return v.d.String()
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil && plainNumber(s) {
		if math.Abs(f) > float64(math.MaxInt64)/float64(time.Second) {
			return 0, fmt.Errorf("is out of range")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("is not a duration: use e.g. 15s, 1m30s, or 15 for seconds")
	}
	return d, nil
}

// plainNumber is a decimal number without exponent, like 15 or 0.5: what
// ParseFloat takes beyond that (1e3, inf, hex) is no way to write seconds.
func plainNumber(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return s != "" && strings.Count(s, ".") <= 1 && strings.Trim(s, "0123456789.") == ""
}
