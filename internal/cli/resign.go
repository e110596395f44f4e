package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdconn"
	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/oneline"
)

const flagResignTimeout = "timeout"

func resignCommand() *cli.Command {
	return &cli.Command{
		Name:  "resign",
		Usage: "ask the leader to step down: it stops its command and queues again at the back",
		Description: "The leader itself steps down, so no two commands overlap. With --id, only\n" +
			"if that id leads (else exit 3). If the leader does not step down within\n" +
			"--timeout, exit 125, or with --force delete its key in one compare-and-delete\n" +
			"transaction on the key and its create revision: the next leader still waits\n" +
			"for the old lease.",
		Flags: append(electionFlags(),
			&cli.StringFlag{Name: flagID, Category: catElection, Usage: "resign only if this id leads"},
			durationFlag(cli.GenericFlag{Name: flagResignTimeout, Category: catOperations,
				Usage: "how long the leader has to step down"}, 30*time.Second),
			&cli.BoolFlag{Name: flagForce, Category: catOperations, Usage: "after --timeout, delete the leader's key"},
		),
		OnUsageError:       usageError,
		CustomHelpTemplate: commandHelp(resignExamples, resignExitCodes),
		Action:             resignAction,
	}
}

const resignExamples = `  etcdlead resign --election=reports --id=web-1/4121
  etcdlead resign --election=reports --timeout=10s --force
`

const resignExitCodes = `  0        the leader stepped down (or its key was deleted, --force)
  3        no leader, or --id does not lead
  125      the leader did not step down within --timeout; options, etcd
`

func resignAction(c *cli.Context) error {
	l, cc, err := oneElection(c, "resign")
	if err != nil {
		return err
	}
	id, err := optText(c, flagID, "the id that must lead", "to ask whoever leads")
	if err != nil {
		return err
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
	r := resigner{cli: cli, layout: l, timeout: timeout, dial: cc.DialTimeout, conn: cc}
	return r.resign(c.Context, id, c.Bool(flagForce))
}

// oneElection reads what resign, pause and resume share: no arguments,
// the election (required) and its prefix, and the connection.
func oneElection(c *cli.Context, cmd string) (campaign.Layout, etcdconn.Config, error) {
	if c.NArg() > 0 {
		return campaign.Layout{}, etcdconn.Config{}, failf("%s takes no arguments, got %q: see etcdlead %s --help", cmd, c.Args().First(), cmd)
	}
	election, err := optText(c, flagElection, "the election's name", "")
	if err != nil {
		return campaign.Layout{}, etcdconn.Config{}, err
	}
	if election == "" {
		return campaign.Layout{}, etcdconn.Config{}, failf("%s needs --election NAME", cmd)
	}
	prefix, err := optText(c, flagPrefix, "a key prefix", "to use "+defaultPrefix)
	if err != nil {
		return campaign.Layout{}, etcdconn.Config{}, err
	}
	l, err := campaign.NewLayout(prefix, election)
	if err != nil {
		return campaign.Layout{}, etcdconn.Config{}, inFlags(err)
	}
	cc, err := parseConn(c)
	return l, cc, err
}

type resigner struct {
	cli           *clientv3.Client
	layout        campaign.Layout
	timeout, dial time.Duration
	conn          etcdconn.Config // for messages
}

// bounded is a context for one request: each has --dial-timeout of its own,
// also the delete that follows a --timeout longer than that.
func (r resigner) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(clientv3.WithRequireLeader(ctx), r.dial)
}

func (r resigner) resign(ctx context.Context, id string, force bool) error {
	rctx, cancel := r.bounded(ctx)
	defer cancel()
	el, rev, err := campaign.ReadElection(rctx, r.cli, r.layout)
	if err != nil {
		return etcdFailed("resign", r.conn, err)
	}
	p := r.layout.Prefix()
	leader := el.Leader()
	if leader == nil {
		return withCode(exitcode.NoLeader, fmt.Errorf("no leader in %s", p))
	}
	// As etcd holds it, it may be anything: printed only as one clean line.
	who := oneline.Quote(string(leader.Value))
	if id != "" && string(leader.Value) != id {
		return withCode(exitcode.NoLeader, fmt.Errorf("%s does not lead %s: %s does", oneline.Quote(id), p, who))
	}
	clear, err := campaign.RequestResign(rctx, r.cli, r.layout, leader, r.dial)
	if err != nil {
		return etcdFailed("resign", r.conn, err)
	}
	defer clear()
	wctx, wcancel := context.WithTimeout(ctx, r.timeout)
	defer wcancel()
	gone, err := campaign.WaitSteppedDown(wctx, r.cli, r.layout, leader, el.RecordOf(leader.Lease), rev+1)
	switch {
	case err != nil:
		return failf("resign: %v", err)
	case gone:
		fmt.Printf("%s stepped down from %s\n", who, p)
		return nil
	case !force:
		return failf("asked %s to step down, but its child has not stopped within --timeout %s: retry, or add --force to delete its key", who, r.timeout)
	}
	dctx, dcancel := r.bounded(ctx)
	defer dcancel()
	deleted, err := campaign.ForceDelete(dctx, r.cli, leader)
	if err != nil {
		return etcdFailed("resign --force", r.conn, err)
	}
	if deleted {
		fmt.Printf("deleted the key of %s (%s); the next leader waits for its lease\n", who, leader.Key)
	} else {
		fmt.Printf("%s stepped down from %s\n", who, p)
	}
	return nil
}
