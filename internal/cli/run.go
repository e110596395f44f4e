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
	mon := ops.New(rc.election, rc.id, rc.timing.TTL, ops.Notify)
	if rc.statusAddr != "" {
		stop, err := ops.Serve(rc.statusAddr, mon)
		if err != nil {
			return failf("%v", err)
		}
		defer stop()
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
		Observer:       runner.Observer(mon, keepers),
	})
	if err != nil {
		return failf("%v", err)
	}
	log.Info("starting", "election", rc.election, "id", rc.id, "ttl", rc.timing.TTL,
		"kill_timeout", rc.timing.KillTimeout, "fence_margin", rc.timing.FenceMargin,
		"outage_tolerance", rc.timing.OutageTolerance())
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
