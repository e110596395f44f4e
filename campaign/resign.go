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
// deleted and its child known gone. Its record (record, as ReadElection
// found it) is the proof: its term deletes it only once its child and
// every descendant are gone; a term that ended without deleting it (its
// supervisor frozen or killed, its lease ended) is judged by the rule a
// successor follows (clearEnded), and its record left to the next
// candidate. A deleted key alone is not the proof (it may have been
// deleted by hand, or the term may be waiting out a keeper that does not
// answer). A leader without a record (an older etcdlead's) has stepped
// down once its lease is gone. fromRev follows the read that found the
// leader, so a step-down between that read and the request is not missed.
// It returns false, and no error, once ctx's deadline passes first.
func WaitSteppedDown(ctx context.Context, cli *clientv3.Client, l Layout, leader, record *mvccpb.KeyValue, fromRev int64) (bool, error) {
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
	lease := clientv3.LeaseID(leader.Lease)
	c := judge(cli)
	for {
		gone, err := steppedDown(wctx, cli, c, l, lease, record)
		switch {
		case expired():
			return false, nil
		case err != nil:
			return false, err
		case gone:
			return true, nil
		}
		select {
		case <-wctx.Done():
			return false, nil
		case <-time.After(resignPoll):
		}
	}
}

// steppedDown looks once at a leader whose queue key is gone: true once
// its record is gone, or its term ended and its child is known gone.
func steppedDown(ctx context.Context, cli *clientv3.Client, c *clearer, l Layout, lease clientv3.LeaseID, record *mvccpb.KeyValue) (bool, error) {
	if record == nil {
		ttl, err := cli.TimeToLive(ctx, lease)
		return err == nil && ttl.TTL == -1, err
	}
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(string(record.Key)), clientv3.OpGet(l.SentinelKey(lease), clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return false, err
	}
	c.see(resp.Header)
	rec, sentinel := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	switch {
	case len(rec) == 0 || rec[0].CreateRevision != record.CreateRevision:
		return true, nil
	case len(sentinel) > 0 && clientv3.LeaseID(sentinel[0].Lease) == lease:
		return false, nil // its lease lives
	}
	r, ok := ParseRecord(rec[0].Value)
	return true, c.clearEnded(ctx, endedTerm{lease: lease, key: string(record.Key), mod: rec[0].ModRevision, rec: r, known: ok})
}

// ForceDelete deletes the leader's queue key if it is still that term's
// (the same create revision: a check-then-delete could hit the next
// leader's key), and reports whether it did. The term's sentinel and
// record stay, so every candidate still waits for the old lease, and for
// its child.
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
