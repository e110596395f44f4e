package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const flagResignTimeout = "timeout"

func resignCommand() *cli.Command {
	return &cli.Command{
		Name:  "resign",
		Usage: "ask the leader to step down; it stops its command, revokes, and campaigns again from the back",
		Description: "The leader itself steps down, so no two commands overlap. With --id, only if that\n" +
			"id leads (else exit 3). If the leader does not step down within --timeout, exit\n" +
			"125, or with --force delete its key in one compare-and-delete transaction on\n" +
			"the key and its create revision: the next leader still waits for the old lease.",
		Flags: append(electionFlags(),
			&cli.StringFlag{Name: flagID, Usage: "resign only if this id leads"},
			&cli.DurationFlag{Name: flagResignTimeout, Value: 30 * time.Second, Usage: "how long the leader has to step down"},
			&cli.BoolFlag{Name: flagForce, Usage: "after --timeout, delete the leader's key"},
		),
		OnUsageError: usageError,
		Action:       resignAction,
	}
}

func resignAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return failf("resign takes no arguments, got %q: see etcdlead resign --help", c.Args().First())
	}
	election := c.String(flagElection)
	if election == "" {
		return failf("resign needs --election NAME")
	}
	if _, err := electionName(election, ""); err != nil {
		return err
	}
	cc, err := parseConn(c)
	if err != nil {
		return err
	}
	if c.Duration(flagResignTimeout) <= 0 {
		return failf("--timeout %s must be positive", c.Duration(flagResignTimeout))
	}
	cli, err := newClient(cc)
	if err != nil {
		return err
	}
	defer cli.Close()
	p := normalPrefix(c.String(flagPrefix)) + election
	r := resigner{cli: cli, prefix: p, key: resignKey(p), timeout: c.Duration(flagResignTimeout), dial: cc.dialTimeout}
	return r.resign(c.Context, c.String(flagID), c.Bool(flagForce))
}

type resigner struct {
	cli           *clientv3.Client
	prefix, key   string
	timeout, dial time.Duration
}

func (r resigner) resign(ctx context.Context, id string, force bool) error {
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), r.dial)
	defer cancel()
	resp, err := r.cli.Get(rctx, r.prefix+"/", clientv3.WithPrefix(), clientv3.WithLimit(1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return failf("resign: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return withCode(exitNoLeader, fmt.Errorf("no leader in %s", r.prefix))
	}
	leader := resp.Kvs[0]
	if id != "" && string(leader.Value) != id {
		return withCode(exitNoLeader, fmt.Errorf("%s does not lead %s: %s does", id, r.prefix, leader.Value))
	}
	if _, err := r.cli.Put(rctx, r.key, string(leader.Key)); err != nil {
		return failf("resign: %v", err)
	}
	defer r.clearRequest(string(leader.Key))
	gone, err := r.waitGone(ctx, string(leader.Key), resp.Header.Revision+1)
	switch {
	case err != nil:
		return failf("resign: %v", err)
	case gone:
		fmt.Printf("%s stepped down from %s\n", leader.Value, r.prefix)
		return nil
	case !force:
		return failf("%s did not step down within --timeout %s: retry, or add --force to delete its key", leader.Value, r.timeout)
	}
	// Compare on the create revision: a check-then-delete could hit the
	// next leader's key.
	tx, err := r.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(string(leader.Key)), "=", leader.CreateRevision)).
		Then(clientv3.OpDelete(string(leader.Key))).Commit()
	if err != nil {
		return failf("resign --force: %v", err)
	}
	if tx.Succeeded {
		fmt.Printf("deleted the key of %s (%s); the next leader waits for its lease\n", leader.Value, leader.Key)
	} else {
		fmt.Printf("%s stepped down from %s\n", leader.Value, r.prefix)
	}
	return nil
}

// waitGone watches the leader's key for its deletion, up to the timeout.
// fromRev follows the read that saw the key, so a step-down between that
// read and the request is not missed.
func (r resigner) waitGone(ctx context.Context, key string, fromRev int64) (bool, error) {
	wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), r.timeout)
	defer cancel()
	wch := r.cli.Watch(wctx, key, clientv3.WithRev(fromRev), clientv3.WithFilterPut())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if errors.Is(wctx.Err(), context.DeadlineExceeded) {
				return false, nil
			}
			return false, err
		}
		for range resp.Events {
			return true, nil
		}
	}
	return false, nil
}

// clearRequest removes the request if it still names this leader.
func (r resigner) clearRequest(leaderKey string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.dial)
	defer cancel()
	_, _ = r.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(r.key), "=", leaderKey)).
		Then(clientv3.OpDelete(r.key)).Commit()
}
