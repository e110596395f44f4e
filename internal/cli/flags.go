package cli

import (
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdconn"
	"github.com/etcdlead/etcdlead/internal/runner"
)

// Flag names.
const (
	flagEndpoints    = "endpoints"
	flagDialTimeout  = "dial-timeout"
	flagCACert       = "cacert"
	flagCert         = "cert"
	flagKey          = "key"
	flagInsecureTLS  = "insecure-skip-tls-verify"
	flagUser         = "user"
	flagPasswordFile = "password-file"
	flagLogLevel     = "log-level"
	flagLogFormat    = "log-format"

	flagElection     = "election"
	flagPrefix       = "prefix"
	flagTTL          = "ttl"
	flagID           = "id"
	flagKillSignal   = "kill-signal"
	flagKillTimeout  = "kill-timeout"
	flagFenceMargin  = "fence-margin"
	flagWait         = "wait"
	flagConflictCode = "conflict-exit-code"
	flagOnce         = "once"
	flagNoWait       = "no-wait"
	flagHoldAtLeast  = "hold-at-least"
	flagTimeout      = "timeout"
	flagRestart      = "restart"
	flagStatusAddr   = "status-addr"
	flagJSON         = "json"
	flagForce        = "force"
)

// Environment variables. Those that a child is also given (README.md) are
// named for what they hold, so a flag variable never clashes with them.
const (
	envEndpoints    = runner.EnvEndpoints // also given to the child
	envDialTimeout  = "ETCDLEAD_DIAL_TIMEOUT"
	envCACert       = "ETCDLEAD_CACERT_FILE"
	envCert         = "ETCDLEAD_CERT_FILE"
	envKey          = "ETCDLEAD_KEY_FILE"
	envInsecureTLS  = "ETCDLEAD_INSECURE_SKIP_TLS_VERIFY"
	envUser         = "ETCDLEAD_USER"
	envPasswordFile = "ETCDLEAD_PASSWORD_FILE"
	envLogLevel     = "ETCDLEAD_LOG_LEVEL"
	envLogFormat    = "ETCDLEAD_LOG_FORMAT"
	envElection     = "ETCDLEAD_ELECTION"
	envPrefix       = "ETCDLEAD_PREFIX"
	envTTL          = "ETCDLEAD_TTL"
	envID           = runner.EnvID // also given to the child
	envKillSignal   = "ETCDLEAD_KILL_SIGNAL"
	envKillTimeout  = "ETCDLEAD_KILL_TIMEOUT"
	envFenceMargin  = "ETCDLEAD_FENCE_MARGIN"
	envWait         = "ETCDLEAD_WAIT"
	envConflictCode = "ETCDLEAD_CONFLICT_EXIT_CODE"
	envOnce         = "ETCDLEAD_ONCE"
	envNoWait       = "ETCDLEAD_NO_WAIT"
	envHoldAtLeast  = "ETCDLEAD_HOLD_AT_LEAST"
	envTimeout      = "ETCDLEAD_TIMEOUT"
	envRestart      = "ETCDLEAD_RESTART"
	envStatusAddr   = "ETCDLEAD_STATUS_ADDR"
	envPassword     = etcdconn.EnvPassword

	envEtcdctlEndpoints = "ETCDCTL_ENDPOINTS"
	envEtcdctlCACert    = "ETCDCTL_CACERT"
	envEtcdctlCert      = "ETCDCTL_CERT"
	envEtcdctlKey       = "ETCDCTL_KEY"
	envEtcdctlUser      = etcdconn.EnvEtcdctlUser
	envEtcdctlPassword  = etcdconn.EnvEtcdctlPassword
)

const (
	defaultEndpoints   = "127.0.0.1:2379"
	defaultPrefix      = "etcdlead/"
	defaultDialTimeout = 5 * time.Second
)

// connectionFlags are global and also accepted after a subcommand. Only the
// global copies read the environment: a variable must not outrank a flag
// given on the command line before the subcommand (see pick).
func connectionFlags() []cli.Flag { return withEnv(connectionFlagSet(), true) }

// withEnv keeps or drops the flags' variables; dropped ones are still named
// in the help text.
func withEnv(flags []cli.Flag, keep bool) []cli.Flag {
	if keep {
		return flags
	}
	for _, f := range flags {
		switch f := f.(type) {
		case *cli.StringFlag:
			f.Usage, f.EnvVars = envUsage(f.Usage, f.EnvVars), nil
		case *cli.DurationFlag:
			f.Usage, f.EnvVars = envUsage(f.Usage, f.EnvVars), nil
		case *cli.BoolFlag:
			f.Usage, f.EnvVars = envUsage(f.Usage, f.EnvVars), nil
		}
	}
	return flags
}

func envUsage(usage string, vars []string) string {
	if len(vars) == 0 {
		return usage
	}
	return usage + " [$" + strings.Join(vars, ", $") + "]"
}

func connectionFlagSet() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagEndpoints, Value: defaultEndpoints, EnvVars: []string{envEndpoints, envEtcdctlEndpoints},
			Usage: "etcd endpoints, comma-separated, with or without http:// or https://"},
		&cli.DurationFlag{Name: flagDialTimeout, Value: defaultDialTimeout, EnvVars: []string{envDialTimeout},
			Usage: "bound on each attempt to reach etcd"},
		&cli.StringFlag{Name: flagCACert, EnvVars: []string{envCACert, envEtcdctlCACert}, Usage: "CA bundle to verify etcd's certificate", TakesFile: true},
		&cli.StringFlag{Name: flagCert, EnvVars: []string{envCert, envEtcdctlCert}, Usage: "client certificate for etcd", TakesFile: true},
		&cli.StringFlag{Name: flagKey, EnvVars: []string{envKey, envEtcdctlKey}, Usage: "client certificate's private key", TakesFile: true},
		&cli.BoolFlag{Name: flagInsecureTLS, EnvVars: []string{envInsecureTLS}, Usage: "do not verify etcd's certificate (testing only)"},
		&cli.StringFlag{Name: flagUser, EnvVars: []string{envUser, envEtcdctlUser},
			Usage: "etcd user; the password comes from --password-file, " + envPassword + " or " + envEtcdctlPassword},
		&cli.StringFlag{Name: flagPasswordFile, EnvVars: []string{envPasswordFile}, Usage: "file holding the etcd password", TakesFile: true},
		&cli.StringFlag{Name: flagLogLevel, Value: "info", EnvVars: []string{envLogLevel}, Usage: "trace, debug, info, warn or error"},
		&cli.StringFlag{Name: flagLogFormat, Value: "text", EnvVars: []string{envLogFormat}, Usage: "text or json (logs go to stderr)"},
	}
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

// electionFlags are those of the operator commands (status, resign).
func electionFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: flagElection, EnvVars: []string{envElection}, Usage: "election name"},
		&cli.StringFlag{Name: flagPrefix, Value: defaultPrefix, EnvVars: []string{envPrefix}, Usage: "key prefix of all elections"},
	}, withEnv(connectionFlagSet(), false)...)
}

// pick returns the innermost context in which name was set, so a connection
// flag given before the subcommand is not hidden by the subcommand's
// default. The subcommand's copies have no variables, so a variable counts
// only at the top, below any flag on the command line.
func pick(c *cli.Context, name string) *cli.Context {
	for _, x := range c.Lineage() {
		if x.IsSet(name) {
			return x
		}
	}
	return c
}
