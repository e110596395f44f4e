package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/etcdconn"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/runner"
	"github.com/etcdlead/etcdlead/supervisor"
)

// runConfig is everything `etcdlead run` needs, validated. run is the one
// configuration the loop, the campaign (run.Campaign) and the keepers
// (run.Spec) are given, built here; runAction fills in what exists only
// once the run begins. The other fields are the CLI's own.
type runConfig struct {
	run          runner.Config
	conn         etcdconn.Config
	killSet      bool // --kill-timeout was given
	conflictCode int
	checks       checkOptions
	notify       string // --notify, "" for none
	notifyWait   time.Duration
	containment  string // supervisor.ContainAuto, ContainCgroup or ContainProcessGroup
	statusAddr   string
}

// election is the election's name.
func (rc runConfig) election() string { return rc.run.Campaign.Layout.Name() }

// timing is the resolved --ttl, --kill-timeout, --fence-margin and
// --renew-interval.
func (rc runConfig) timing() campaign.Timing { return rc.run.Campaign.Timing }

func parseRunConfig(c *cli.Context, raw []string) (runConfig, error) {
	var rc runConfig
	spec := &rc.run.Spec
	var err error
	if spec.Argv, err = commandArgs(c, raw); err != nil {
		return rc, err
	}
	if spec.LogLevel, spec.LogJSON, err = logOptions(c); err != nil {
		return rc, err
	}
	if rc.conn, err = parseConn(c); err != nil {
		return rc, err
	}
	// In this order, which decides which of several mistakes is told.
	for _, parse := range []func(*cli.Context, *runConfig) error{
		parseCandidate, parseTiming, parseConflictCode, parseWait, parseHolders,
		parseCronOptions, parseRunID, parseCheckOptions, parseNotify,
	} {
		if err := parse(c, &rc); err != nil {
			return rc, err
		}
	}
	if rc.checks.healthRestart && (rc.run.Once || rc.run.Campaign.RunID != "") {
		return rc, errors.New("--health-action=restart starts the command again in place, --once and --run-id run it once: give one of them")
	}
	if spec.Path, err = resolveCommand(spec.Argv[0]); err != nil {
		return rc, err
	}
	rc.relay()
	return rc, nil
}

// relay hands the loop, the campaign and the keepers what they take from
// options read for another, or from no option: the fence's K and m, the
// etcd connection's endpoints and dial timeout (which bounds each campaign
// request that has no cadence of its own), the boot clock and the child's
// inherited environment.
func (rc *runConfig) relay() {
	t := rc.timing()
	rc.run.Spec.KillTimeout, rc.run.Spec.FenceMargin = t.KillTimeout, t.FenceMargin
	rc.run.Spec.Env = childBaseEnv(os.Environ())
	rc.run.Campaign.RequestTimeout = rc.conn.DialTimeout
	rc.run.Campaign.Now = bootclock.Now
	rc.run.Endpoints = rc.conn.Endpoints
}

// parseCandidate reads who campaigns where: --election, --prefix and --id.
func parseCandidate(c *cli.Context, rc *runConfig) error {
	command := rc.run.Spec.Argv[0]
	absent := "to use the command's base name"
	if isInterpreter(filepath.Base(command)) {
		absent = "" // electionName refuses an interpreter's name
	}
	given, err := optText(c, flagElection, "an election name", absent)
	if err != nil {
		return err
	}
	election, err := electionName(given, command)
	if err != nil {
		return err
	}
	prefix, err := optText(c, flagPrefix, "a key prefix", "to use "+defaultPrefix)
	if err != nil {
		return err
	}
	camp := &rc.run.Campaign
	if camp.Layout, err = campaign.NewLayout(prefix, election); err != nil {
		return inFlags(err)
	}
	if camp.ID, err = optText(c, flagID, "this candidate's name", "to use "+defaultIDText); err != nil {
		return err
	}
	if camp.ID == "" {
		host, _ := os.Hostname()
		camp.ID = defaultID(host, os.Getpid(), rand.Reader)
	}
	return inFlags(campaign.CheckID(camp.ID))
}

// parseTiming reads --kill-signal and the durations that decide the fence.
func parseTiming(c *cli.Context, rc *runConfig) error {
	signal, err := optText(c, flagKillSignal, "a signal like SIGTERM", "for SIGTERM")
	if err != nil {
		return err
	}
	if rc.run.Spec.KillSignal, err = parseSignal(signal); err != nil {
		return err
	}
	var t campaign.Timing
	var set []campaign.TimingField
	for _, d := range []struct {
		flag  string
		field campaign.TimingField
		to    *time.Duration
	}{
		{flagTTL, campaign.FieldTTL, &t.TTL},
		{flagKillTimeout, campaign.FieldKillTimeout, &t.KillTimeout},
		{flagFenceMargin, campaign.FieldFenceMargin, &t.FenceMargin},
		{flagRenew, campaign.FieldRenewInterval, &t.RenewInterval},
	} {
		v, given, err := optDuration(c, d.flag)
		if err != nil {
			return err
		}
		*d.to = v
		if given {
			set = append(set, d.field)
		}
	}
	rc.killSet = slices.Contains(set, campaign.FieldKillTimeout)
	rc.run.Campaign.Timing, err = campaign.ResolveTiming(t, set...)
	return inFlags(err)
}

// parseCheckOptions reads the health and eligibility checks' options
// (parseChecks).
func parseCheckOptions(c *cli.Context, rc *runConfig) (err error) {
	rc.checks, err = parseChecks(c)
	return err
}

// parseConflictCode reads --conflict-exit-code.
func parseConflictCode(c *cli.Context, rc *runConfig) (err error) {
	if rc.conflictCode, err = optInt(c, flagConflictCode); err != nil {
		return err
	}
	if rc.conflictCode < 0 || rc.conflictCode > 255 {
		return fmt.Errorf("--conflict-exit-code %d is not an exit code: use 0 to 255", rc.conflictCode)
	}
	return nil
}

// parseHolders reads --holders.
func parseHolders(c *cli.Context, rc *runConfig) (err error) {
	n := &rc.run.Campaign.Holders
	if *n, err = optInt(c, flagHolders); err != nil {
		return err
	}
	if *n < 1 || *n > campaign.MaxHolders {
		return fmt.Errorf("--holders %d is not a number of holders: use 1 (one leader, the default) to %d", *n, campaign.MaxHolders)
	}
	return nil
}

// parseWait reads --wait and --no-wait. --wait 0 gives up at once, as
// `flock -w 0` does; only leaving --wait out waits for ever. Of the two, one
// given on the command line wins over the other's variable, which is then
// not even read.
func parseWait(c *cli.Context, rc *runConfig) error {
	waitFrom, noWaitFrom := originOf(c, flagWait), originOf(c, flagNoWait)
	var err error
	if noWaitFrom >= waitFrom {
		if rc.run.Campaign.NoWait, err = optBool(c, flagNoWait); err != nil {
			return err
		}
	}
	if waitFrom < noWaitFrom && rc.run.Campaign.NoWait {
		return nil // --no-wait on the command line overrides $ETCDLEAD_WAIT
	}
	wait, given, err := optDuration(c, flagWait)
	switch {
	case err != nil:
		return err
	case wait < 0:
		return fmt.Errorf("--wait %s must not be negative: use 0 to give up at once, or leave it out to wait for ever", wait)
	case !given:
		return nil
	case waitFrom > noWaitFrom:
		rc.run.Campaign.NoWait = false // --wait on the command line overrides $ETCDLEAD_NO_WAIT
	case rc.run.Campaign.NoWait && wait > 0 && waitFrom == fromEnv:
		return fmt.Errorf("%s and %s contradict each other: unset one of them", envNoWait, envWait)
	case rc.run.Campaign.NoWait && wait > 0:
		return errors.New("--no-wait and --wait contradict each other: give one of them")
	}
	rc.run.Wait = wait
	if wait == 0 {
		rc.run.Campaign.NoWait = true
	}
	return nil
}

// parseCronOptions reads the options that decide when a run ends.
func parseCronOptions(c *cli.Context, rc *runConfig) error {
	var err error
	if rc.run.Once, err = optBool(c, flagOnce); err != nil {
		return err
	}
	if rc.run.HoldAtLeast, _, err = optDuration(c, flagHoldAtLeast); err != nil {
		return err
	}
	if rc.run.Timeout, _, err = optDuration(c, flagTimeout); err != nil {
		return err
	}
	restart, err := optText(c, flagRestart, "never, on-failure or always", "for never")
	if err != nil {
		return err
	}
	rc.run.Restart = runner.Restart(restart)
	if rc.containment, err = optText(c, flagContainment, "auto, cgroup or process-group", "for auto"); err != nil {
		return err
	}
	rc.statusAddr = optString(c, flagStatusAddr) // empty is its default: no status server
	switch {
	case rc.containment != supervisor.ContainAuto && rc.containment != supervisor.ContainCgroup && rc.containment != supervisor.ContainProcessGroup:
		return fmt.Errorf("--containment %q is not a containment: use auto, cgroup or process-group", rc.containment)
	case restart != "never" && restart != "on-failure" && restart != "always":
		return fmt.Errorf("--restart %q is not a policy: use never, on-failure or always", restart)
	case rc.run.Once && restart != "never":
		return fmt.Errorf("--once runs the command at most once, --restart %s again: give one of them", restart)
	case rc.run.HoldAtLeast < 0 || rc.run.Timeout < 0:
		return errors.New("--hold-at-least and --timeout must not be negative")
	}
	if rc.statusAddr != "" {
		if _, _, err := net.SplitHostPort(rc.statusAddr); err != nil {
			return fmt.Errorf("--status-addr %q is not HOST:PORT: use e.g. 127.0.0.1:9090", rc.statusAddr)
		}
	}
	return nil
}

// defaultNotifyTimeout bounds a run of --notify's command. Short enough
// that the stop of a leader, its last run and stopped's fit in the
// 30-second grace a Kubernetes pod gets by default.
const defaultNotifyTimeout = 10 * time.Second

// parseNotify reads --notify and --notify-timeout.
func parseNotify(c *cli.Context, rc *runConfig) error {
	rc.notify = optString(c, flagNotify) // empty is its default: none
	var err error
	if rc.notifyWait, _, err = optDuration(c, flagNotifyTimeout); err != nil {
		return err
	}
	if rc.notifyWait <= 0 {
		return fmt.Errorf("--notify-timeout %s must be above 0: use e.g. --notify-timeout 10s", rc.notifyWait)
	}
	return nil
}

// maxRunIDTTL bounds --run-id-ttl: a record is for one firing, and etcd
// keeps its lease for as long as it lasts.
const maxRunIDTTL = 30 * 24 * time.Hour

// parseRunID reads --run-id and the options that only it gives a meaning.
func parseRunID(c *cli.Context, rc *runConfig) error {
	var err error
	if rc.run.Campaign.RunID, err = optText(c, flagRunID, "a name for this firing", "for none"); err != nil {
		return err
	}
	var ttlGiven bool
	if rc.run.Campaign.RunTTL, ttlGiven, err = optDuration(c, flagRunIDTTL); err != nil {
		return err
	}
	if rc.run.RunRetry, err = optBool(c, flagRunIDRetry); err != nil {
		return err
	}
	if rc.run.Campaign.RunID == "" {
		switch {
		case ttlGiven:
			return errors.New("--run-id-ttl needs --run-id: give the firing a run id, or leave --run-id-ttl out")
		case rc.run.RunRetry:
			return errors.New("--run-id-retry needs --run-id: give the firing a run id, or leave --run-id-retry out")
		}
		return nil
	}
	if err := campaign.CheckRunID(rc.run.Campaign.RunID); err != nil {
		return inFlags(err)
	}
	switch {
	case rc.run.Campaign.RunTTL < rc.timing().TTL || rc.run.Campaign.RunTTL > maxRunIDTTL || rc.run.Campaign.RunTTL%time.Second != 0:
		return fmt.Errorf("--run-id-ttl %s is out of range: use whole seconds from the --ttl (%s) to %s", rc.run.Campaign.RunTTL, rc.timing().TTL, maxRunIDTTL)
	case rc.run.Restart == runner.RestartAlways:
		return errors.New("--run-id runs the command once per firing, --restart always again and again: give one of them")
	}
	return nil
}

// commandArgs returns what follows "--". Without "--", a command's own flags
// could be taken for etcdlead's, so it is required.
func commandArgs(c *cli.Context, raw []string) ([]string, error) {
	i := slices.Index(raw, "--")
	if i < 0 {
		if c.NArg() > 0 {
			return nil, fmt.Errorf("missing -- before the command: use etcdlead run [options] -- %s", strings.Join(c.Args().Slice(), " "))
		}
		return nil, errors.New("no command given: use etcdlead run [options] -- COMMAND [ARGS...]")
	}
	cmd := raw[i+1:]
	if got := c.Args().Slice(); !slices.Equal(got, cmd) {
		return nil, fmt.Errorf("unexpected argument %q before --: put options before -- and the command after it", got[0])
	}
	if len(cmd) == 0 || cmd[0] == "" {
		return nil, errors.New("no command given after --: use etcdlead run [options] -- COMMAND [ARGS...]")
	}
	return cmd, nil
}

// resolveCommand finds COMMAND before campaigning, so a typo fails at once
// with the shells' codes instead of after winning an election.
func resolveCommand(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return "", withCode(exitcode.NotFound, fmt.Errorf("command not found: %s", name))
		}
		return "", withCode(exitcode.CannotExec, fmt.Errorf("cannot execute %s: %v", name, errors.Unwrap(err)))
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return "", withCode(exitcode.CannotExec, fmt.Errorf("cannot execute %s: is a directory", name))
	}
	return path, nil
}

// interpreters would make a silent default election name join unrelated
// jobs: every `sh -c ...` would share one election.
var interpreters = []string{"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox",
	"env", "python", "pypy", "node", "nodejs", "deno", "bun", "ruby", "perl", "php", "java", "lua", "luajit",
	"tclsh", "wish", "rscript", "julia", "dotnet", "nice", "nohup", "timeout", "sudo", "doas", "su",
	"xargs", "npx", "npm", "uv", "pipx", "poetry", "bundle", "exec", "stdbuf", "setsid", "chroot", "flock"}

func isInterpreter(base string) bool {
	b := strings.ToLower(base)
	b = strings.TrimRight(b, "0123456789.-")
	return slices.Contains(interpreters, b)
}

// electionName is --election, or COMMAND's base name when it names a
// program rather than an interpreter.
func electionName(given, command string) (string, error) {
	name := given
	if name == "" {
		base := filepath.Base(command)
		if isInterpreter(base) {
			return "", fmt.Errorf("%s runs arbitrary programs, so its name is no election: give one with --election NAME", base)
		}
		name = base
	}
	return name, inFlags(campaign.CheckElection(name))
}

func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("--kill-signal %q is not a signal: use a name like SIGTERM or a number", s)
}

// defaultIDText is how help names defaultID; the flag's usage adds the
// case of PID 1.
const defaultIDText = "hostname/pid"

// defaultID is the id of a candidate started without --id: its host and
// pid, which tell the candidates of one host apart. As PID 1, a container's
// entrypoint, the pid tells nothing (every container's etcdlead is 1) and
// the hostname may not either (containers that share the host's UTS
// namespace share its name), so six random hex digits, drawn once per
// start, keep the replicas of one election apart in status and resign --id.
func defaultID(host string, pid int, random io.Reader) string {
	if pid != 1 {
		return fmt.Sprintf("%s/%d", host, pid)
	}
	b := make([]byte, 3)
	if _, err := io.ReadFull(random, b); err != nil {
		return host + "/1"
	}
	return host + "/1-" + hex.EncodeToString(b)
}
