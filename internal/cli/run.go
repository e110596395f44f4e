package cli

import (
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdconn"
	"github.com/etcdlead/etcdlead/internal/logbuf"
	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/internal/runner"
	"github.com/etcdlead/etcdlead/internal/trace"
	"github.com/etcdlead/etcdlead/signals"
	"github.com/etcdlead/etcdlead/supervisor"
)

// runAction wires a run together: signals first, then the operator
// surface, the client, the keepers and the campaign, and hands them to the
// term loop. Everything it starts is stopped before it returns.
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
	sigs := signals.Catch()
	defer sigs.Stop()
	log := newLogger(rc.logLevel, rc.logJSON)
	mon := ops.New(rc.election, rc.id, appVersion(), rc.timing.TTL, ops.Notify)
	if rc.statusAddr != "" {
		addr, stop, err := ops.Serve(rc.statusAddr, mon)
		if err != nil {
			return failf("%v", err)
		}
		defer stop()
		// The port chosen for :0, and whether every interface listens.
		log.Info("serving status", "addr", addr)
	}
	defer ops.Watchdog(mon.Healthy)()
	client, err := etcdconn.New(rc.conn)
	if err != nil {
		return failf("%v", err)
	}
	defer client.Close()
	keepers := runner.NewStandby(supervisor.Spec{
		Path: rc.path, Argv: rc.argv, Env: childBaseEnv(os.Environ()),
		KillSignal: rc.killSignal, KillTimeout: rc.timing.KillTimeout, FenceMargin: rc.timing.FenceMargin,
		LogLevel: rc.logLevel, LogJSON: rc.logJSON,
	}, log.Named("supervisor"))
	defer keepers.Drop()
	camp, err := campaign.New(campaign.Config{
		Client:         client,
		Layout:         rc.layout,
		ID:             rc.id,
		TTL:            rc.timing.TTL,
		Guard:          rc.timing.KillTimeout + rc.timing.FenceMargin,
		RequestTimeout: rc.conn.DialTimeout,
		Now:            supervisor.Now,
		Logger:         log.Named("campaign"),
		NoWait:         rc.noWait,
		Holders:        rc.holders,
		Observer:       runner.Observer(mon, keepers),
	})
	if err != nil {
		return failf("%v", err)
	}
	started := []any{"election", rc.election, "id", rc.id, "ttl", rc.timing.TTL,
		"kill_timeout", rc.timing.KillTimeout, "fence_margin", rc.timing.FenceMargin,
		"outage_tolerance", rc.timing.OutageTolerance()}
	if rc.holders > 1 {
		started = append(started, "holders", rc.holders)
	}
	log.Info("starting", started...)
	if !rc.killSet && rc.timing.KillTimeout != campaign.DefaultKillTimeout {
		log.Info("kill timeout shortened to TTL/4 so the fence fits the TTL", "kill_timeout", rc.timing.KillTimeout, "ttl", rc.timing.TTL)
	}
	r := runner.New(runner.Config{
		Election:    rc.election,
		Layout:      rc.layout,
		ID:          rc.id,
		Timing:      rc.timing,
		KillSignal:  rc.killSignal,
		Wait:        rc.wait,
		NoWait:      rc.noWait,
		Holders:     rc.holders,
		Once:        rc.once,
		HoldAtLeast: rc.holdAtLeast,
		Timeout:     rc.timeout,
		Restart:     runner.Restart(rc.restart),
		Endpoints:   rc.conn.Endpoints,
		DialTimeout: rc.conn.DialTimeout,
	}, runner.Campaigns(camp), keepers, sigs, mon, log)
	return &runEnd{Outcome: r.Run(c.Context), conflictCode: rc.conflictCode}
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
			name == trace.Var, // etcdlead's own processes only (internal/trace)
			slices.Contains(runner.ChildVars, name):
			continue
		}
		out = append(out, kv)
	}
	return out
}

// newLogger writes through the process's asynchronous stderr writer: a
// stderr that does not drain must not hold up a renewal or a stop. Lines
// that do not fit are dropped and counted; Main flushes at exit.
func newLogger(level string, json bool) hclog.Logger {
	return logbuf.Logger(hclog.LoggerOptions{
		Name:       "etcdlead",
		Level:      hclog.LevelFromString(level),
		JSONFormat: json,
	})
}

func runFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: flagElection, EnvVars: []string{envElection},
			Usage: "election name (default: the command's base name; required for shells and interpreters)"},
		&cli.StringFlag{Name: flagPrefix, Value: defaultPrefix, EnvVars: []string{envPrefix}, Usage: "key prefix of all elections"},
		&cli.DurationFlag{Name: flagTTL, Value: campaign.DefaultTTL, EnvVars: []string{envTTL},
			Usage: "lease TTL, whole seconds from 2s to 1h: how long a crashed leader blocks the election"},
		&cli.StringFlag{Name: flagID, EnvVars: []string{envID}, Usage: "this candidate's id, stored as the key's value (default: hostname/pid)"},
		&cli.StringFlag{Name: flagKillSignal, Value: "SIGTERM", EnvVars: []string{envKillSignal}, Usage: "signal that asks the child to stop"},
		&cli.DurationFlag{Name: flagKillTimeout, Value: campaign.DefaultKillTimeout, EnvVars: []string{envKillTimeout},
			Usage: "grace between the kill signal and SIGKILL (default 5s, or TTL/4 when 5s does not fit)"},
		&cli.DurationFlag{Name: flagFenceMargin, EnvVars: []string{envFenceMargin},
			Usage: "how long before the lease could expire the child must be dead (default max(250ms, TTL/20))"},
		&cli.DurationFlag{Name: flagWait, EnvVars: []string{envWait}, Usage: "give up if not leading after this long (default: wait for ever)"},
		&cli.IntFlag{Name: flagConflictCode, Value: exitConflict, EnvVars: []string{envConflictCode},
			Usage: "exit code when --wait or --no-wait ends while another candidate leads"},
		&cli.BoolFlag{Name: flagOnce, EnvVars: []string{envOnce},
			Usage: "run the command at most once: if leadership is lost, stop it and exit 76"},
		&cli.BoolFlag{Name: flagNoWait, EnvVars: []string{envNoWait},
			Usage: "like flock -n: exit 75 at once if another candidate leads"},
		&cli.IntFlag{Name: flagHolders, Value: 1, EnvVars: []string{envHolders},
			Usage: "run up to N copies of the command at once, one per slot; every candidate of the election needs the same N"},
		&cli.DurationFlag{Name: flagHoldAtLeast, EnvVars: []string{envHoldAtLeast},
			Usage: "keep leadership this long after winning, even if the command ends sooner (cron singletons)"},
		&cli.DurationFlag{Name: flagTimeout, EnvVars: []string{envTimeout},
			Usage: "stop the command after this long and exit 124, like timeout(1)"},
		&cli.StringFlag{Name: flagRestart, Value: "never", EnvVars: []string{envRestart},
			Usage: "never, on-failure or always: campaign again after the command exits"},
		&cli.StringFlag{Name: flagStatusAddr, EnvVars: []string{envStatusAddr},
			Usage: "serve /healthz, /leader, /status and /metrics over HTTP on HOST:PORT"},
	}, withEnv(connectionFlagSet(), false)...)
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
