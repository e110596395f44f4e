package cli

import (
	"crypto/rand"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/runner"
)

// unsetenv removes a variable for one test, restoring it afterwards.
func unsetenv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "") // registers the restore
	os.Unsetenv(name)
}

// TestEmptyOptionRefused holds every string option with a default to one
// rule: given empty, on the command line or in its variable, it is refused
// with one line that names it and the fix; only an option left out takes
// its default. `--election="$UNSET"` would otherwise join the command's
// election.
func TestEmptyOptionRefused(t *testing.T) {
	for _, v := range append(envVarsOf(runFlags()), envEtcdctlEndpoints) {
		unsetenv(t, v)
	}
	rc, err := parseRunArgs(nil)
	if err != nil || rc.election() != "true" || rc.run.Campaign.Layout.QueuePrefix() != defaultPrefix+"true/" || rc.run.Campaign.ID == "" ||
		strings.Join(rc.conn.Endpoints, ",") != defaultEndpoints || rc.run.Restart != runner.RestartNever {
		t.Fatalf("options left out: %+v, %v; want their defaults", rc, err)
	}
	for _, c := range []struct{ name, env, want string }{
		{flagElection, envElection, "give an election name, or %s to use the command's base name"},
		{flagPrefix, envPrefix, "give a key prefix, or %s to use etcdlead/"},
		{flagID, envID, "give this candidate's name, or %s to use " + defaultIDText},
		{flagEndpoints, envEndpoints, "give host:port[,host:port...], or %s to use 127.0.0.1:2379"},
		{flagEndpoints, envEtcdctlEndpoints, "give host:port[,host:port...], or %s to use 127.0.0.1:2379"},
		{flagLogLevel, envLogLevel, "give trace, debug, info, warn or error, or %s for info"},
		{flagLogFormat, envLogFormat, "give text or json, or %s for text"},
		{flagKillSignal, envKillSignal, "give a signal like SIGTERM, or %s for SIGTERM"},
		{flagRestart, envRestart, "give never, on-failure or always, or %s for never"},
		{flagContainment, envContainment, "give auto, cgroup or process-group, or %s for auto"},
	} {
		for _, args := range [][]string{{"--" + c.name + "="}, {"--" + c.name, ""}} {
			want := "--" + c.name + " is empty: " + strings.Replace(c.want, "%s", "leave --"+c.name+" out", 1)
			_, err := parseRunArgs(args)
			checkRefusal(t, strings.Join(args, " "), err, want)
		}
		t.Run(c.env, func(t *testing.T) {
			t.Setenv(c.env, "")
			want := c.env + " is set but empty: " + strings.Replace(c.want, "%s", "unset it", 1)
			_, err := parseRunArgs(nil)
			checkRefusal(t, c.env+"=", err, want)
			// A flag on the command line wins; the variable is not read.
			if _, err := parseRunArgs([]string{"--" + c.name + "=" + goodValue[c.name]}); err != nil {
				t.Errorf("--%s=%s with %s empty: %v", c.name, goodValue[c.name], c.env, err)
			}
		})
	}
	// The shell's name is no election: there is no default to name.
	raw := []string{"etcdlead", "run", "--election=", "--", "sh", "-c", "true"}
	app := newApp(raw)
	err = app.Run(raw)
	checkRefusal(t, "--election= -- sh", err, "--election is empty: give an election name")
}

var goodValue = map[string]string{
	flagElection: "jobs", flagPrefix: "p/", flagID: "me", flagEndpoints: "127.0.0.1:2379",
	flagLogLevel: "warn", flagLogFormat: "json", flagKillSignal: "SIGINT", flagRestart: "always",
	flagContainment: "process-group",
}

func checkRefusal(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted", what)
		return
	}
	if got := errorMessage(err); got != want {
		t.Errorf("%s: refused with\n\t%q\nwant\n\t%q", what, got, want)
	}
	if code := exitCode(err); code != exitcode.Failure {
		t.Errorf("%s: exit code %d, want %d", what, code, exitcode.Failure)
	}
}

func envVarsOf(flags []cli.Flag) []string {
	var out []string
	for _, f := range flags {
		if e, ok := f.(interface{ GetEnvVars() []string }); ok {
			out = append(out, e.GetEnvVars()...)
		}
	}
	return out
}

// TestDefaultID: as PID 1 (a container's entrypoint) the pid tells the
// replicas nothing, so the default id carries a random suffix instead.
func TestDefaultID(t *testing.T) {
	if got := defaultID("web-1", 4121, strings.NewReader("\x00\x00\x00")); got != "web-1/4121" {
		t.Errorf("pid 4121: %q, want web-1/4121", got)
	}
	if got := defaultID("web-1", 1, strings.NewReader("\x3f\x9a\x2c")); got != "web-1/1-3f9a2c" {
		t.Errorf("pid 1: %q, want web-1/1-3f9a2c", got)
	}
	a, b := defaultID("web-1", 1, rand.Reader), defaultID("web-1", 1, rand.Reader)
	if a == b || !regexp.MustCompile(`^web-1/1-[0-9a-f]{6}$`).MatchString(a) {
		t.Errorf("pid 1, two starts: %q and %q, want web-1/1-RANDOM each, unequal", a, b)
	}
	if err := campaign.CheckID(a); err != nil {
		t.Errorf("%q: %v", a, err)
	}
}
