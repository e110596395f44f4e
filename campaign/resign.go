package campaign

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The resign request is the other side of the guard (guard.go): a put of
// the election's resign key naming the leader's queue key, which that
// term's guard reads and answers by stepping down (docs/design.md, "Keys").

// RequestResign asks the term whose queue key is leader to step down. The
// returned clear removes the request, if it still names that key, in a
// request bounded by timeout.
func RequestResign(ctx context.Context, cli *clientv3.Client, l Layout, leader *mvccpb.KeyValue, timeout time.Duration) (clear func(), err error) {
	key := string(leader.Key)
	if _, err := cli.Put(clientv3.WithRequireLeader(ctx), l.ResignKey(), key); err != nil {
		return nil, err
	}
	return func() {
		cctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(context.Background()), timeout)
		defer cancel()
		k := l.ResignKey()
		_, _ = cli.Txn(cctx).If(clientv3.Compare(clientv3.Value(k), "=", key)).
			Then(clientv3.OpDelete(k)).Commit()
	}, nil
}

// WaitSteppedDown waits until the leader has stepped down: its queue key
// deleted and its lease gone. A leader revokes its lease only once its
// child and every descendant are gone, so an ended lease is the proof; a
// deleted key alone is not (it may have been deleted by hand, or the lease
// may be waiting out a keeper that does not answer). fromRev follows the
// read that found the leader, so a step-down between that read and the
// request is not missed. It returns false, and no error, once ctx's
// deadline passes first.
func WaitSteppedDown(ctx context.Context, cli *clientv3.Client, leader *mvccpb.KeyValue, fromRev int64) (bool, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	expired := func() bool { return errors.Is(ctx.Err(), context.DeadlineExceeded) }
	deleted := false
	for resp := range cli.Watch(wctx, string(leader.Key), clientv3.WithRev(fromRev), clientv3.WithFilterPut()) {
		if err := resp.Err(); err != nil {
			if expired() {
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
		ttl, err := cli.TimeToLive(wctx, clientv3.LeaseID(leader.Lease))
		switch {
		case expired():
			return false, nil
		case err != nil:
			return false, err
		case ttl.TTL == -1:
			return true, nil
		}
		select {
		case <-wctx.Done():
			return false, nil
		case <-time.After(resignPoll):
		}
	}
}

// resignPoll is how often WaitSteppedDown asks whether the leader's lease,
// whose key is gone, has ended: etcd tells of no lease's end by an event.
const resignPoll = 100 * time.Millisecond

// ForceDelete deletes the leader's queue key if it is still that term's
// (the same create revision: a check-then-delete could hit the next
// leader's key), and reports whether it did. The term's sentinel stays, so
// every candidate still waits for the old lease.
func ForceDelete(ctx context.Context, cli *clientv3.Client, leader *mvccpb.KeyValue) (bool, error) {
	key := string(leader.Key)
	tx, err := cli.Txn(clientv3.WithRequireLeader(ctx)).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", leader.CreateRevision)).
		Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, err
	}
	return tx.Succeeded, nil
}
