package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/etcdlead/etcdlead/internal/etcdconn"
)

const (
	defaultEndpoints   = "127.0.0.1:2379"
	defaultPrefix      = "etcdlead/"
	defaultDialTimeout = 5 * time.Second
)

// connectionFlags are global and also accepted after a subcommand (see
// given: the innermost wins).
func connectionFlags() []cli.Flag { return connectionFlagSet() }

func connectionFlagSet() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagEndpoints, Value: defaultEndpoints, EnvVars: []string{envEndpoints, envEtcdctlEndpoints},
			Category: catConnection, Usage: "etcd endpoints, with or without http:// or https://"},
		durationFlag(cli.GenericFlag{Name: flagDialTimeout, EnvVars: []string{envDialTimeout, envEtcdctlDialTimeout}, Category: catConnection,
			Usage: "bound on each attempt to reach etcd"}, defaultDialTimeout),
		&cli.StringFlag{Name: flagCACert, EnvVars: []string{envCACert, envEtcdctlCACert}, Category: catConnection,
			Usage: "CA bundle to verify etcd's certificate", TakesFile: true},
		&cli.StringFlag{Name: flagCert, EnvVars: []string{envCert, envEtcdctlCert}, Category: catConnection,
			Usage: "client certificate for etcd", TakesFile: true},
		&cli.StringFlag{Name: flagKey, EnvVars: []string{envKey, envEtcdctlKey}, Category: catConnection,
			Usage: "client certificate's private key", TakesFile: true},
		&cli.BoolFlag{Name: flagInsecureTLS, EnvVars: []string{envInsecureTLS}, Category: catConnection,
			Usage: "do not verify etcd's certificate (testing only)"},
		&cli.StringFlag{Name: flagUser, EnvVars: []string{envUser, envEtcdctlUser}, Category: catConnection,
			Usage: "etcd user (user:password is accepted); the password comes from --password-file, " +
				envPassword + " or " + envEtcdctlPassword},
		&cli.StringFlag{Name: flagPasswordFile, EnvVars: []string{envPasswordFile}, Category: catConnection,
			Usage: "file holding the etcd password", TakesFile: true},
		&cli.StringFlag{Name: flagLogLevel, Value: "info", EnvVars: []string{envLogLevel}, Category: catLogging,
			Usage: "trace, debug, info, warn or error"},
		&cli.StringFlag{Name: flagLogFormat, Value: "text", EnvVars: []string{envLogFormat}, Category: catLogging,
			Usage: "text or json; logs go to stderr"},
	}
}

// electionFlags are those of the operator commands (status, resign).
func electionFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: flagElection, EnvVars: []string{envElection}, Category: catElection, Usage: "election name"},
		&cli.StringFlag{Name: flagPrefix, Value: defaultPrefix, EnvVars: []string{envPrefix}, Category: catElection,
			Usage: "key prefix of all elections"},
	}, connectionFlagSet()...)
}

func logOptions(c *cli.Context) (string, bool, error) {
	level, err := optText(c, flagLogLevel, "trace, debug, info, warn or error", "for info")
	if err != nil {
		return "", false, err
	}
	level = strings.ToLower(level)
	switch level {
	case "trace", "debug", "info", "warn", "error":
	default:
		return "", false, fmt.Errorf("--log-level %q is not a level: use trace, debug, info, warn or error", level)
	}
	f, err := optText(c, flagLogFormat, "text or json", "for text")
	if err != nil {
		return "", false, err
	}
	switch f {
	case "text":
		return level, false, nil
	case "json":
		return level, true, nil
	default:
		return "", false, fmt.Errorf("--log-format %q is not a format: use text or json", f)
	}
}

func parseConn(c *cli.Context) (etcdconn.Config, error) {
	var cc etcdconn.Config
	endpoints, err := optText(c, flagEndpoints, "host:port[,host:port...]", "to use "+defaultEndpoints)
	if err != nil {
		return cc, err
	}
	if cc.Endpoints, err = parseEndpoints(endpoints); err != nil {
		return cc, err
	}
	if cc.DialTimeout, _, err = optDuration(c, flagDialTimeout); err != nil {
		return cc, err
	}
	if cc.DialTimeout <= 0 {
		return cc, fmt.Errorf("--dial-timeout %s must be positive", cc.DialTimeout)
	}
	cc.CACert = optString(c, flagCACert)
	cc.Cert = optString(c, flagCert)
	cc.Key = optString(c, flagKey)
	if (cc.Cert == "") != (cc.Key == "") {
		return cc, errors.New("--cert and --key go together: give both or neither")
	}
	if cc.InsecureTLS, err = optBool(c, flagInsecureTLS); err != nil {
		return cc, err
	}
	cc.User = optString(c, flagUser)
	if u, p, ok := strings.Cut(cc.User, ":"); ok {
		cc.User, cc.Password = u, p
	}
	if f := optString(c, flagPasswordFile); f != "" {
		if cc.User == "" {
			return cc, errors.New("--password-file was given without a user: set --user too")
		}
		if cc.Password, err = readPasswordFile(c, f); err != nil {
			return cc, err
		}
	} else if cc.Password == "" && cc.User != "" {
		// Password variables mean nothing without a user, and are often
		// set in a shell for other tools.
		cc.Password = firstEnv(etcdconn.EnvPassword, etcdconn.EnvEtcdctlPassword)
	}
	if cc.User != "" {
		// Once per process: etcd says so at the first login.
		cc.AuthDisabled = func() {
			warn(c, "etcd has authentication disabled: --user is ignored, and every client may do what this one does", "user", cc.User)
		}
	}
	return cc, nil
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// parseEndpoints accepts host:port, http://host:port and https://host:port.
func parseEndpoints(s string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			return nil, fmt.Errorf("--endpoints %q has an empty entry: use host:port[,host:port...]", s)
		}
		hostport := e
		if strings.Contains(e, "://") {
			u, err := url.Parse(e)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
				return nil, fmt.Errorf("--endpoints entry %q is not an endpoint: use host:port, http://host:port or https://host:port", e)
			}
			hostport = u.Host
		}
		host, port, err := net.SplitHostPort(hostport)
		if err != nil || host == "" {
			return nil, fmt.Errorf("--endpoints entry %q is not host:port: use e.g. 127.0.0.1:2379", e)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("--endpoints entry %q has no valid port: use e.g. 127.0.0.1:2379", e)
		}
		out = append(out, e)
	}
	return out, nil
}

// etcdFailed words a failed request of an operator command. One that etcd
// did not answer in time names where it was sent, the bound and, when the
// client knows it, why no connection was made.
func etcdFailed(what string, cc etcdconn.Config, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return failf("%s: etcd at %s not reached within --dial-timeout %s: %v", what, strings.Join(cc.Endpoints, ","), cc.DialTimeout, err)
	}
	return failf("%s: %v", what, err)
}
