package cli

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdconn"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/oneline"
)

const (
	flagReason = "reason"
	flagBy     = "by"
	// maxReason bounds --reason and --by, stored in the pause key: etcd
	// refuses a request over its own limit, and status prints them.
	maxReason = 1024
)

func pauseCommand() *cli.Command {
	return &cli.Command{
		Name:  "pause",
		Usage: "stop the election's command everywhere, and start it nowhere until resume",
		Description: "Puts the election's pause key. Every candidate reads it before it may start its\n" +
			"command and watches it while it waits or leads: the leader stops its command\n" +
			"(command and every descendant gone, then its lease revoked) and every\n" +
			"candidate waits, holding no lease, until etcdlead resume. pause returns once\n" +
			"no command of the election runs, or exits 125 after --timeout with the pause in\n" +
			"place. Candidates of an etcdlead older than pause ignore it.",
		Flags: append(electionFlags(),
			&cli.StringFlag{Name: flagReason, Category: catOperations, Usage: "why, for status to show"},
			&cli.StringFlag{Name: flagBy, Category: catOperations, Usage: "who, for status to show (default: user@hostname)"},
			durationFlag(cli.GenericFlag{Name: flagResignTimeout, Category: catOperations,
				Usage: "how long the running command has to stop"}, 30*time.Second),
			&cli.BoolFlag{Name: flagNoWait, Category: catOperations, Usage: "return once the pause is in place, without waiting for the command to stop"},
		),
		OnUsageError:       usageError,
		CustomHelpTemplate: commandHelp(pauseExamples, pauseExitCodes),
		Action:             pauseAction,
	}
}

const pauseExamples = `  etcdlead pause --election=reports --reason="db migration, OPS-123"
  etcdlead pause --election=reports --no-wait
`

const pauseExitCodes = `  0        paused, and no command of the election runs (--no-wait: paused)
  125      a command still ran at --timeout (the pause stays); options, etcd
`

func resumeCommand() *cli.Command {
	return &cli.Command{
		Name:               "resume",
		Usage:              "lift the election's pause: the candidates campaign again",
		Flags:              electionFlags(),
		OnUsageError:       usageError,
		CustomHelpTemplate: commandHelp(resumeExamples, resumeExitCodes),
		Action:             resumeAction,
	}
}

const resumeExamples = `  etcdlead resume --election=reports
`

const resumeExitCodes = `  0        resumed
  3        the election was not paused
  125      options, configuration, etcd
`

func pauseAction(c *cli.Context) error {
	l, cc, err := oneElection(c, "pause")
	if err != nil {
		return err
	}
	rec := campaign.PauseRecord{By: whoAmI(), At: time.Now().UTC().Truncate(time.Second)}
	if c.IsSet(flagBy) {
		rec.By = c.String(flagBy)
	}
	rec.Reason = c.String(flagReason)
	for name, v := range map[string]string{flagBy: rec.By, flagReason: rec.Reason} {
		if len(v) > maxReason {
			return failf("--%s is %d bytes long: give at most %d", name, len(v), maxReason)
		}
	}
	timeout, _, err := optDuration(c, flagResignTimeout)
	if err != nil {
		return err
	}
	if timeout <= 0 {
		return failf("--timeout %s must be positive", timeout)
	}
	cli, err := etcdconn.New(cc)
	if err != nil {
		return err
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(c.Context, cc.DialTimeout)
	defer cancel()
	rev, err := campaign.Pause(pctx, cli, l, rec)
	if err != nil {
		return etcdFailed("pause", cc, err)
	}
	p := l.Prefix()
	if c.Bool(flagNoWait) {
		fmt.Printf("paused %s; a running command stops on its own\n", p)
		return nil
	}
	wctx, wcancel := context.WithTimeout(c.Context, timeout)
	defer wcancel()
	alive, err := campaign.WaitIdle(wctx, cli, l, rev)
	switch {
	case err != nil:
		return etcdFailed("pause", cc, fmt.Errorf("paused, but waiting for the command to stop failed: %w", err))
	case len(alive) > 0:
		return failf("paused %s, but %d term(s) from before the pause still hold a lease at --timeout %s: their command may still run (an etcdlead older than pause ignores it); run etcdlead status --election %s", p, len(alive), timeout, oneline.Quote(l.Name()))
	}
	fmt.Printf("paused %s; no command of it runs\n", p)
	return nil
}

func resumeAction(c *cli.Context) error {
	l, cc, err := oneElection(c, "resume")
	if err != nil {
		return err
	}
	cli, err := etcdconn.New(cc)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(c.Context), cc.DialTimeout)
	defer cancel()
	was, err := campaign.Resume(ctx, cli, l)
	if err != nil {
		return etcdFailed("resume", cc, err)
	}
	if !was {
		return withCode(exitcode.NoLeader, fmt.Errorf("%s was not paused", l.Prefix()))
	}
	fmt.Printf("resumed %s\n", l.Prefix())
	return nil
}

// whoAmI is user@hostname, as far as they are known.
func whoAmI() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return name + "@" + host
}
