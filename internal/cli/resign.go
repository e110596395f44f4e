package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdconn"
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
		OnUsageError: usageError,
		Action:       resignAction,
	}
}

func resignAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return failf("resign takes no arguments, got %q: see etcdlead resign --help", c.Args().First())
	}
	election := optString(c, flagElection)
	if election == "" {
		return failf("resign needs --election NAME")
	}
	l, err := campaign.NewLayout(optString(c, flagPrefix), election)
	if err != nil {
		return inFlags(err)
	}
	cc, err := parseConn(c)
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
	return r.resign(c.Context, optString(c, flagID), c.Bool(flagForce))
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
		return withCode(exitNoLeader, fmt.Errorf("no leader in %s", p))
	}
	// As etcd holds it, it may be anything: printed only as one clean line.
	who := oneline.Quote(string(leader.Value))
	if id != "" && string(leader.Value) != id {
		return withCode(exitNoLeader, fmt.Errorf("%s does not lead %s: %s does", oneline.Quote(id), p, who))
	}
	if _, err := r.cli.Put(rctx, r.layout.ResignKey(), string(leader.Key)); err != nil {
		return etcdFailed("resign", r.conn, err)
	}
	defer r.clearRequest(string(leader.Key))
	gone, err := r.waitGone(ctx, string(leader.Key), clientv3.LeaseID(leader.Lease), rev+1)
	switch {
	case err != nil:
		return failf("resign: %v", err)
	case gone:
		fmt.Printf("%s stepped down from %s\n", who, p)
		return nil
	case !force:
		return failf("asked %s to step down, but its child has not stopped within --timeout %s: retry, or add --force to delete its key", who, r.timeout)
	}
	// Compare on the create revision: a check-then-delete could hit the
	// next leader's key. The term's sentinel stays, so every candidate
	// still waits for the old lease.
	dctx, dcancel := r.bounded(ctx)
	defer dcancel()
	tx, err := r.cli.Txn(dctx).
		If(clientv3.Compare(clientv3.CreateRevision(string(leader.Key)), "=", leader.CreateRevision)).
		Then(clientv3.OpDelete(string(leader.Key))).Commit()
	if err != nil {
		return etcdFailed("resign --force", r.conn, err)
	}
	if tx.Succeeded {
		fmt.Printf("deleted the key of %s (%s); the next leader waits for its lease\n", who, leader.Key)
	} else {
		fmt.Printf("%s stepped down from %s\n", who, p)
	}
	return nil
}

// waitGone waits, up to the timeout, until the leader has stepped down:
// its key deleted and its lease gone. A leader revokes its lease only once
// its child and every descendant are gone, so an ended lease is the proof;
// a deleted key alone is not (it may have been deleted by hand, or the
// lease may be waiting out a keeper that does not answer). fromRev follows
// the read that saw the key, so a step-down between that read and the
// request is not missed.
func (r resigner) waitGone(ctx context.Context, key string, lease clientv3.LeaseID, fromRev int64) (bool, error) {
	wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), r.timeout)
	defer cancel()
	wch := r.cli.Watch(wctx, key, clientv3.WithRev(fromRev), clientv3.WithFilterPut())
	deleted := false
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if errors.Is(wctx.Err(), context.DeadlineExceeded) {
				return false, nil
			}
			return false, err
		}
		if len(resp.Events) > 0 {
			deleted = true
			break
		}
	}
	if !deleted {
		return false, nil
	}
	for {
		ttl, err := r.cli.TimeToLive(wctx, lease)
		switch {
		case errors.Is(wctx.Err(), context.DeadlineExceeded):
			return false, nil
		case err != nil:
			return false, err
		case ttl.TTL == -1:
			return true, nil
		}
		select {
		case <-wctx.Done():
			return false, nil
		case <-time.After(leasePoll):
		}
	}
}

// leasePoll is how often resign asks whether the leader's lease, whose key
// is gone, has ended: etcd tells of no lease's end by an event.
const leasePoll = 100 * time.Millisecond

// clearRequest removes the request if it still names this leader.
func (r resigner) clearRequest(leaderKey string) {
	ctx, cancel := r.bounded(context.Background())
	defer cancel()
	k := r.layout.ResignKey()
	_, _ = r.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(k), "=", leaderKey)).
		Then(clientv3.OpDelete(k)).Commit()
}
