package cli

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"

	"github.com/etcdlead/etcdlead/internal/health"
	"github.com/etcdlead/etcdlead/internal/runner"
)

// checkOptions are the health and eligibility checks' options, validated.
type checkOptions struct {
	healthCmd, healthURL string
	healthInterval       time.Duration
	healthTimeout        time.Duration
	healthRetries        int
	healthStartPeriod    time.Duration
	healthRestart        bool
	eligibleCmd          string
	eligibleInterval     time.Duration
	eligibleTimeout      time.Duration
}

// Docker's defaults for its --health-* options (docker run).
const (
	defaultHealthInterval = 30 * time.Second
	defaultHealthTimeout  = 30 * time.Second
	defaultHealthRetries  = 3
	defaultEligible       = 10 * time.Second
)

func parseChecks(c *cli.Context) (checkOptions, error) {
	var o checkOptions
	var err error
	o.healthCmd = optString(c, flagHealthCmd)
	o.healthURL = optString(c, flagHealthURL)
	o.eligibleCmd = optString(c, flagEligibleCmd)
	durations := []struct {
		flag string
		to   *time.Duration
	}{{flagHealthInterval, &o.healthInterval}, {flagHealthTimeout, &o.healthTimeout}, {flagHealthStartPeriod, &o.healthStartPeriod},
		{flagEligibleInterval, &o.eligibleInterval}, {flagEligibleTimeout, &o.eligibleTimeout}}
	for _, d := range durations {
		if *d.to, _, err = optDuration(c, d.flag); err != nil {
			return o, err
		}
		switch {
		case *d.to < 0:
			return o, fmt.Errorf("--%s %s must not be negative", d.flag, *d.to)
		case *d.to == 0 && d.flag != flagHealthStartPeriod:
			return o, fmt.Errorf("--%s must be above 0: use e.g. --%s 30s", d.flag, d.flag)
		}
	}
	if o.healthRetries, err = optInt(c, flagHealthRetries); err != nil {
		return o, err
	}
	action, err := optText(c, flagHealthAction, "step-down or restart", "for step-down")
	if err != nil {
		return o, err
	}
	switch {
	case o.healthCmd != "" && o.healthURL != "":
		return o, errors.New("--health-cmd and --health-url are two checks of one command: give one of them")
	case action != "step-down" && action != "restart":
		return o, fmt.Errorf("--health-action %q is not an action: use step-down or restart", action)
	case o.healthRetries < 1:
		return o, fmt.Errorf("--health-retries %d is not a number of failures: use 1 or more", o.healthRetries)
	}
	o.healthRestart = action == "restart"

	if o.healthURL != "" {
		u, err := url.Parse(o.healthURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return o, fmt.Errorf("--health-url %q is not an http:// or https:// URL: use e.g. http://127.0.0.1:8080/healthz", o.healthURL)
		}
	}
	return o, nil
}

// checks builds the runner's checks: their commands run with env, under
// keepers with the command's kill timeout and fence margin.
func (o checkOptions) checks(rc runConfig, env []string, log hclog.Logger) (*runner.HealthCheck, *runner.Check) {
	command := func(shell string, timeout time.Duration) *health.Command {
		return &health.Command{Shell: shell, Timeout: timeout, Env: env,
			KillTimeout: rc.timing().KillTimeout, FenceMargin: rc.timing().FenceMargin, Log: log}
	}
	var h *runner.HealthCheck
	var probe health.Probe
	switch {
	case o.healthCmd != "":
		probe = command(o.healthCmd, o.healthTimeout)
	case o.healthURL != "":
		probe = &health.HTTP{URL: o.healthURL, Timeout: o.healthTimeout}
	}
	if probe != nil {
		h = &runner.HealthCheck{Check: runner.Check{Probe: probe, Interval: o.healthInterval},
			Retries: o.healthRetries, StartPeriod: o.healthStartPeriod, Restart: o.healthRestart}
	}
	var e *runner.Check
	if o.eligibleCmd != "" {
		e = &runner.Check{Probe: command(o.eligibleCmd, o.eligibleTimeout), Interval: o.eligibleInterval}
	}
	return h, e
}

func checkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagHealthCmd, EnvVars: []string{envHealthCmd}, Category: catHealth,
			Usage: "check the command's health with /bin/sh -c CMD while it runs: exit 0 is healthy, any other code not"},
		&cli.StringFlag{Name: flagHealthURL, EnvVars: []string{envHealthURL}, Category: catHealth,
			Usage: "check the command's health with an HTTP GET of URL: a 2xx answer is healthy"},
		durationFlag(cli.GenericFlag{Name: flagHealthInterval, EnvVars: []string{envHealthInterval}, Category: catHealth,
			Usage: "time between health checks"}, defaultHealthInterval),
		durationFlag(cli.GenericFlag{Name: flagHealthTimeout, EnvVars: []string{envHealthTimeout}, Category: catHealth,
			Usage: "a health check that takes longer fails, its processes killed"}, defaultHealthTimeout),
		&cli.IntFlag{Name: flagHealthRetries, Value: defaultHealthRetries, EnvVars: []string{envHealthRetries}, Category: catHealth,
			Usage: "failures in a row that make the command unhealthy"},
		durationFlag(cli.GenericFlag{Name: flagHealthStartPeriod, EnvVars: []string{envHealthStartPeriod}, Category: catHealth,
			Usage: "failures this soon after the command started do not count, until a check passes"}, 0),
		&cli.StringFlag{Name: flagHealthAction, Value: "step-down", EnvVars: []string{envHealthAction}, Category: catHealth,
			Usage: "step-down or restart: when the command is unhealthy, stop it and let a waiting candidate lead, or restart it in place"},
		&cli.StringFlag{Name: flagEligibleCmd, EnvVars: []string{envEligibleCmd}, Category: catHealth,
			Usage: "lead only while /bin/sh -c CMD exits 0: checked before queueing and every interval while waiting or leading"},
		durationFlag(cli.GenericFlag{Name: flagEligibleInterval, EnvVars: []string{envEligibleInterval}, Category: catHealth,
			Usage: "time between eligibility checks"}, defaultEligible),
		durationFlag(cli.GenericFlag{Name: flagEligibleTimeout, EnvVars: []string{envEligibleTimeout}, Category: catHealth,
			Usage: "an eligibility check that takes longer fails, its processes killed"}, defaultEligible),
	}
}
