package cli

import (
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdconn"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/health"
	"github.com/etcdlead/etcdlead/internal/logbuf"
	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/internal/runner"
	"github.com/etcdlead/etcdlead/signals"
	"github.com/etcdlead/etcdlead/supervisor"
)

// runAction wires a run together: signals first, then the client, the
// operator surface, containment, the first keeper and the campaign, and
// hands them to the term loop. Everything it starts but the signal catch
// is stopped before it returns.
func runAction(c *cli.Context, raw []string) (err error) {
	if err := supervisor.Supported(); err != nil {
		return failf("%v", err)
	}
	rc, err := parseRunConfig(c, raw)
	if err != nil {
		return err // 125 unless it carries its own code (126, 127)
	}
	// Caught first, so that a stop signal during the first dial already
	// counts (a `systemctl stop` of a campaigning etcdlead ends it at once).
	// Not stopped: the process exits when run returns (Catcher.Stop).
	sigs := signals.Catch()
	// As a container's entrypoint, etcdlead is its PID namespace's init.
	defer supervisor.ReapAdopted()()
	deferred := newDeferredLog(rc, stderrIsTerminal())
	defer deferred.release(true) // a return before the outcome shows what was logged
	log := newLogger(rc.run.Spec.LogLevel, rc.run.Spec.LogJSON, deferred)
	log.Trace("run begins")
	// Made first: the client dials at once, so the connection comes up
	// while containment is chosen and the keeper starts.
	client, err := etcdconn.New(rc.conn)
	if err != nil {
		return failf("%v", err)
	}
	defer client.Close()
	mon, stopStatus, err := operatorSurface(rc, log)
	if err != nil {
		return err
	}
	defer stopStatus()
	defer ops.Watchdog(mon.Healthy)()
	contained, err := contain(rc, mon, log)
	if err != nil {
		return err
	}
	defer supervisor.ReleaseContainment()
	keepers := firstKeeper(rc, log)
	defer keepers.Drop()
	cc := &rc.run.Campaign
	cc.Client, cc.Logger, cc.Containment, cc.Observer = client, log.Named("campaign"), contained.Mode, runner.Observer(mon, keepers)
	camp, err := campaign.New(rc.run.Campaign)
	if err != nil {
		return failf("%v", err)
	}
	logStart(rc, contained, log)
	rc.run.Health, rc.run.Eligible = rc.checks.checks(rc, rc.run.Spec.Env, log.Named("check"))
	rc.run.Notify = rc.notifier(log)
	rc.run.Won, rc.run.Interactive = deferred.won, controllingTerminal()
	r := runner.New(rc.run, runner.Campaigns(camp), keepers, sigs, mon, log)
	end := &runEnd{Outcome: r.Run(c.Context), conflictCode: rc.conflictCode}
	deferred.end(end)
	return end
}

// operatorSurface is what an operator sees of the run: its monitor, and
// with --status-addr the status server, which stop ends.
func operatorSurface(rc runConfig, log hclog.Logger) (mon *ops.Monitor, stop func(), err error) {
	mon = ops.New(rc.election(), rc.run.Campaign.ID, appVersion(), rc.timing().TTL, ops.Notify)
	if rc.statusAddr == "" {
		return mon, func() {}, nil
	}
	addr, stop, err := ops.Serve(rc.statusAddr, mon)
	if err != nil {
		return nil, nil, failf("%v", err)
	}
	// The port chosen for :0, and whether every interface listens.
	log.Info("serving status", "addr", addr)
	return mon, stop, nil
}

// contain decides what holds the command's processes together. Decided
// before the first keeper starts, which is the first to use it.
func contain(rc runConfig, mon *ops.Monitor, log hclog.Logger) (supervisor.Containment, error) {
	contained, err := supervisor.Contain(rc.containment, log.Named("supervisor"))
	if err != nil {
		return contained, failf("--containment=%s: %v", rc.containment, err)
	}
	mon.Contained(contained.Mode, contained.Dir, contained.Why)
	return contained, nil
}

// firstKeeper returns the keepers of the run's children, with the first
// campaign's keeper started unless --no-wait.
func firstKeeper(rc runConfig, log hclog.Logger) *runner.Standby {
	keepers := runner.NewStandby(rc.run.Spec, log.Named("supervisor"))
	if !rc.run.Campaign.NoWait {
		// The first campaign's keeper, started as soon as containment is
		// chosen: a keeper's own start (an exec, a runtime's start, its
		// signals caught) takes about as long as the dial and the two
		// commits of a campaign, and the first child waits for whichever
		// ends last. It starts beside them (Standby.Prepare), and the
		// campaign finds it waiting (Runner.campaign).
		keepers.Prepare()
	}
	return keepers
}

// logStart tells the run's options as resolved, and how it is contained.
func logStart(rc runConfig, contained supervisor.Containment, log hclog.Logger) {
	t := rc.timing()
	started := []any{"election", rc.election(), "id", rc.run.Campaign.ID, "ttl", t.TTL,
		"kill_timeout", t.KillTimeout, "fence_margin", t.FenceMargin,
		"renew_interval", t.RenewInterval, "outage_tolerance", t.OutageTolerance()}
	if rc.run.Campaign.Holders > 1 {
		started = append(started, "holders", rc.run.Campaign.Holders)
	}
	if contained.Mode == supervisor.ContainCgroup {
		started = append(started, "containment", contained.Mode, "cgroup", contained.Dir)
	} else {
		started = append(started, "containment", contained.Mode, "because", contained.Why)
	}
	log.Info("starting", started...)
	if !rc.killSet && t.KillTimeout != campaign.DefaultKillTimeout {
		log.Info("kill timeout shortened to TTL/4 so the fence fits the TTL", "kill_timeout", t.KillTimeout, "ttl", t.TTL)
	}
}

// notifier is --notify's command, nil without one. Contained as a check
// is, and given what a check inherits.
func (rc runConfig) notifier(log hclog.Logger) *runner.Notify {
	if rc.notify == "" {
		return nil
	}
	return &runner.Notify{Command: health.Command{Shell: rc.notify, Timeout: rc.notifyWait, Env: rc.run.Spec.Env,
		KillTimeout: rc.timing().KillTimeout, FenceMargin: rc.timing().FenceMargin, Log: log.Named("notify")}}
}

// childBaseEnv is the inherited part of the child's environment: etcdlead's
// own, without secrets and without the variables that would make a nested
// etcdlead join this election. Known before a term is won, so a standby
// keeper can carry it; the term's variables come with the start.
func childBaseEnv(environ []string) []string {
	out := make([]string, 0, len(environ)+len(runner.ChildVars))
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasSuffix(name, "_PASSWORD"),
			(name == envEtcdctlUser || name == envUser) && strings.Contains(val, ":"),
			name == envElection, name == envPrefix,
			slices.Contains(runner.ChildVars, name):
			continue
		}
		out = append(out, kv)
	}
	return out
}

// newLogger writes through the process's asynchronous stderr writer: a
// stderr that does not drain must not hold up a renewal or a stop. Lines
// that do not fit are dropped and counted; Main flushes at exit. A
// non-nil deferred keeps lines back until the run's outcome is known.
func newLogger(level string, json bool, deferred *deferredLog) hclog.Logger {
	var out io.Writer
	if deferred != nil {
		out = deferred // only when set: a nil Output is what sends the lines to stderr
	}
	return logbuf.Logger(hclog.LoggerOptions{
		Output:     out,
		Name:       "etcdlead",
		Level:      hclog.LevelFromString(level),
		JSONFormat: json,
	})
}

func runFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: flagElection, EnvVars: []string{envElection}, Category: catElection,
			DefaultText: "the command's base name",
			Usage:       "election name; required when the command is a shell or an interpreter"},
		&cli.StringFlag{Name: flagPrefix, Value: defaultPrefix, EnvVars: []string{envPrefix}, Category: catElection,
			Usage: "key prefix of all elections"},
		&cli.StringFlag{Name: flagID, EnvVars: []string{envID}, Category: catElection, DefaultText: defaultIDText,
			Usage: "this candidate's id, stored as its key's value; as PID 1 (in a container), hostname/1-RANDOM"},
		&cli.IntFlag{Name: flagHolders, Value: 1, EnvVars: []string{envHolders}, Category: catElection,
			Usage: "run up to N copies of the command at once, one per slot; every candidate of the election needs the same N"},
		durationFlag(cli.GenericFlag{Name: flagTTL, EnvVars: []string{envTTL}, Category: catTiming,
			Usage: "lease TTL, whole seconds from 2s to 1h: how long a crashed leader blocks the election"}, campaign.DefaultTTL),
		&cli.StringFlag{Name: flagKillSignal, Value: "SIGTERM", EnvVars: []string{envKillSignal}, Category: catTiming,
			Usage: "signal that asks the command to stop"},
		durationFlag(cli.GenericFlag{Name: flagKillTimeout, EnvVars: []string{envKillTimeout}, Category: catTiming,
			DefaultText: "5s, or TTL/4 when 5s does not fit",
			Usage:       "grace between the kill signal and SIGKILL"}, campaign.DefaultKillTimeout),
		durationFlag(cli.GenericFlag{Name: flagFenceMargin, EnvVars: []string{envFenceMargin}, Category: catTiming,
			DefaultText: "max(250ms, TTL/20)",
			Usage:       "how long before the lease could expire the command must be dead"}, 0),
		durationFlag(cli.GenericFlag{Name: flagRenew, EnvVars: []string{envRenew}, Category: catTiming,
			DefaultText: "min(TTL/10, 1s)",
			Usage:       "how often the leader renews its lease; longer costs etcd fewer requests but shortens the etcd outage a leader rides out (TTL - kill timeout - fence margin - this)"}, 0),
		durationFlag(cli.GenericFlag{Name: flagWait, EnvVars: []string{envWait}, Category: catWhen, DefaultText: "for ever",
			Usage: "give up if not leading after this long; 0 gives up at once, like --no-wait"}, 0),
		&cli.BoolFlag{Name: flagNoWait, EnvVars: []string{envNoWait}, Category: catWhen,
			Usage: "give up at once if another candidate leads: exit 75, like flock -n -E 75"},
		&cli.IntFlag{Name: flagConflictCode, Value: exitcode.Conflict, EnvVars: []string{envConflictCode}, Category: catWhen,
			Usage: "exit code when --wait or --no-wait ends while another candidate leads; 0 also keeps such a loss silent, and with --once a run that exits 0"},
		&cli.BoolFlag{Name: flagOnce, EnvVars: []string{envOnce}, Category: catWhen,
			Usage: "run the command at most once: if leadership is lost, stop it and exit 76"},
		durationFlag(cli.GenericFlag{Name: flagHoldAtLeast, EnvVars: []string{envHoldAtLeast}, Category: catWhen,
			Usage: "keep leadership this long after winning, even if the command ends sooner"}, 0),
		durationFlag(cli.GenericFlag{Name: flagTimeout, EnvVars: []string{envTimeout}, Category: catWhen, DefaultText: "none",
			Usage: "stop the command after this long and exit 124, like timeout(1)"}, 0),
		&cli.StringFlag{Name: flagRunID, EnvVars: []string{envRunID}, Category: catWhen,
			Usage: "run the command at most once per firing ID (per slot), on whichever candidate wins first, e.g. \"$(date -u +%Y%m%dT%H%M)\""},
		durationFlag(cli.GenericFlag{Name: flagRunIDTTL, EnvVars: []string{envRunIDTTL}, Category: catWhen,
			Usage: "how long etcd keeps a --run-id's record; a candidate started later runs the firing again"}, 24*time.Hour),
		&cli.BoolFlag{Name: flagRunIDRetry, EnvVars: []string{envRunIDRetry}, Category: catWhen,
			Usage: "take the --run-id's record back when the command fails (exits non-zero or is stopped), so the firing may run again"},
		&cli.StringFlag{Name: flagRestart, Value: "never", EnvVars: []string{envRestart}, Category: catWhen,
			Usage: "never, on-failure or always: campaign again after the command exits"},
		&cli.StringFlag{Name: flagStatusAddr, EnvVars: []string{envStatusAddr}, Category: catOperations,
			Usage: "serve /healthz, /leader, /status and /metrics over HTTP"},
		&cli.StringFlag{Name: flagNotify, EnvVars: []string{envNotify}, Category: catOperations,
			Usage: "run /bin/sh -c CMD with the new role (leader, follower or stopped) as $1 and in $ETCDLEAD_ROLE each time it changes, in order, never holding up a term"},
		durationFlag(cli.GenericFlag{Name: flagNotifyTimeout, EnvVars: []string{envNotifyTimeout}, Category: catOperations,
			Usage: "a --notify command that takes longer is killed with its processes"}, defaultNotifyTimeout),
		&cli.StringFlag{Name: flagContainment, Value: supervisor.ContainAuto, EnvVars: []string{envContainment}, Category: catOperations,
			Usage: "auto, cgroup or process-group: what holds the command's processes together; auto takes a cgroup where one can be made"},
	}, append(checkFlags(), connectionFlagSet()...)...)
}

func runCommand(raw []string) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "campaign for leadership and run COMMAND while leading",
		ArgsUsage: "-- COMMAND [ARGS...]",
		Description: "Campaigns in etcd and starts COMMAND once this process leads. The command is\n" +
			"stopped the moment leadership is lost, and etcdlead campaigns again. It exits\n" +
			"with the command's status when the command ends by itself.",
		Flags:              runFlags(),
		OnUsageError:       usageError,
		CustomHelpTemplate: commandHelp(runExamples, runExitCodes),
		Action:             func(c *cli.Context) error { return runAction(c, raw) },
	}
}

const runExamples = `  etcdlead run --endpoints=10.0.0.5:2379 --election=reports -- ./report
  etcdlead run --election=nightly --once --no-wait \
      --conflict-exit-code=0 --run-id="$(date -u +%Y%m%dT%H%M)" \
      -- /usr/local/bin/nightly-report
  etcdlead run --restart=always --status-addr=127.0.0.1:9464 -- ./worker
`

const runExitCodes = `  N        the command's own code, or 128+N when signal N ended it
  75       not leader when --wait or --no-wait ended, or the --run-id ran
           already (--conflict-exit-code)
  76       --once: leadership was lost while the command ran
  124      --timeout: the command ran too long and was stopped
  125      etcdlead failed: options, configuration, authentication, etcd
  126/127  the command cannot be executed / was not found
`

// controllingTerminal reports whether stdin is this process's controlling
// terminal: the keeper then gives the child the terminal's foreground
// (package supervisor asks the same way).
func controllingTerminal() bool {
	_, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil
}

// stderrIsTerminal reports whether someone may be reading the logs as they
// come (deferredLog).
func stderrIsTerminal() bool {
	_, err := unix.IoctlGetWinsize(2, unix.TIOCGWINSZ) // a terminal has a size; a pipe or a file has none
	return err == nil
}
