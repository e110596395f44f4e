package cli

import (
	"errors"
	"fmt"
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
	"github.com/etcdlead/etcdlead/internal/etcdconn"
)

// runConfig is everything `etcdlead run` needs, validated.
type runConfig struct {
	conn         etcdconn.Config
	election     string
	layout       campaign.Layout // where the election's keys live
	id           string
	timing       campaign.Timing
	killSet      bool // --kill-timeout was given
	killSignal   syscall.Signal
	wait         time.Duration
	conflictCode int
	once         bool
	noWait       bool
	holders      int
	holdAtLeast  time.Duration
	timeout      time.Duration
	restart      string // never, on-failure, always
	statusAddr   string
	path         string   // resolved COMMAND
	argv         []string // COMMAND and ARGS as given
	logLevel     string
	logJSON      bool
}

func parseRunConfig(c *cli.Context, raw []string) (runConfig, error) {
	var rc runConfig
	var err error
	if rc.argv, err = commandArgs(c, raw); err != nil {
		return rc, err
	}
	if rc.logLevel, rc.logJSON, err = logOptions(c); err != nil {
		return rc, err
	}
	if rc.conn, err = parseConn(c); err != nil {
		return rc, err
	}
	if rc.election, err = electionName(pick(c, flagElection).String(flagElection), rc.argv[0]); err != nil {
		return rc, err
	}
	if rc.layout, err = campaign.NewLayout(c.String(flagPrefix), rc.election); err != nil {
		return rc, inFlags(err)
	}
	if rc.id = c.String(flagID); rc.id == "" {
		host, _ := os.Hostname()
		rc.id = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if err := campaign.CheckID(rc.id); err != nil {
		return rc, inFlags(err)
	}
	if rc.killSignal, err = parseSignal(c.String(flagKillSignal)); err != nil {
		return rc, err
	}
	rc.timing, err = campaign.ResolveTiming(campaign.Timing{
		TTL:         c.Duration(flagTTL),
		KillTimeout: c.Duration(flagKillTimeout),
		FenceMargin: c.Duration(flagFenceMargin),
	}, c.IsSet(flagKillTimeout), c.IsSet(flagFenceMargin))
	rc.killSet = c.IsSet(flagKillTimeout)
	if err != nil {
		return rc, inFlags(err)
	}
	if rc.wait = c.Duration(flagWait); rc.wait < 0 {
		return rc, fmt.Errorf("--wait %s must not be negative", rc.wait)
	}
	if rc.conflictCode = c.Int(flagConflictCode); rc.conflictCode < 0 || rc.conflictCode > 255 {
		return rc, fmt.Errorf("--conflict-exit-code %d is not an exit code: use 0 to 255", rc.conflictCode)
	}
	if rc.holders = c.Int(flagHolders); rc.holders < 1 || rc.holders > campaign.MaxHolders {
		return rc, fmt.Errorf("--holders %d is not a number of holders: use 1 (one leader, the default) to %d", rc.holders, campaign.MaxHolders)
	}
	if err := parseCronOptions(c, &rc); err != nil {
		return rc, err
	}
	rc.path, err = resolveCommand(rc.argv[0])
	return rc, err
}

// parseCronOptions reads the options that decide when a run ends.
func parseCronOptions(c *cli.Context, rc *runConfig) error {
	rc.once, rc.noWait = c.Bool(flagOnce), c.Bool(flagNoWait)
	rc.holdAtLeast, rc.timeout = c.Duration(flagHoldAtLeast), c.Duration(flagTimeout)
	rc.restart, rc.statusAddr = c.String(flagRestart), c.String(flagStatusAddr)
	switch {
	case rc.restart != "never" && rc.restart != "on-failure" && rc.restart != "always":
		return fmt.Errorf("--restart %q is not a policy: use never, on-failure or always", rc.restart)
	case rc.once && rc.restart != "never":
		return fmt.Errorf("--once runs the command at most once, --restart %s again: give one of them", rc.restart)
	case rc.noWait && rc.wait > 0:
		return errors.New("--no-wait and --wait contradict each other: give one of them")
	case rc.holdAtLeast < 0 || rc.timeout < 0:
		return errors.New("--hold-at-least and --timeout must not be negative")
	}
	if rc.statusAddr != "" {
		if _, _, err := net.SplitHostPort(rc.statusAddr); err != nil {
			return fmt.Errorf("--status-addr %q is not HOST:PORT: use e.g. 127.0.0.1:9090", rc.statusAddr)
		}
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
			return "", withCode(exitNotFound, fmt.Errorf("command not found: %s", name))
		}
		return "", withCode(exitCannotExec, fmt.Errorf("cannot execute %s: %v", name, errors.Unwrap(err)))
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return "", withCode(exitCannotExec, fmt.Errorf("cannot execute %s: is a directory", name))
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
