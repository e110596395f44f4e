package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/bootclock"
)

// The pause is a key of its own, P.pause, attached to no lease: while it
// exists no term of the election starts its child (docs/design.md,
// "Pause"). Every term reads it in the transactions that decide a start
// (enqueue and the start read) and watches it from its creation on, so
// a term either saw the pause before it could start, or started before
// the pause was put and ends on hearing it. A term that ends so revokes
// its lease, and its candidate waits, holding no lease, until the key is
// gone. So once every term created before the pause has ended (WaitIdle),
// its record gone with it, no child of the election runs or will, until a
// resume.

// ErrPaused ends a term, or refuses a campaign, while the election is
// paused.
var ErrPaused = errors.New("election paused")

// PauseRecord is what the pause key holds: who paused, when and why, for
// status to show. Any value at the key pauses the election, also one that
// is not a record: a pause that cannot be read as one still is one.
type PauseRecord struct {
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// ParsePause reads a pause key's value; ok is false when it is not a
// record etcdlead writes (the election is paused all the same).
func ParsePause(value []byte) (rec PauseRecord, ok bool) {
	return rec, json.Unmarshal(value, &rec) == nil
}

// Pause puts the pause key with rec and returns the revision at which the
// election is paused from: every term created before it may have started
// its child, none created after will (WaitIdle).
func Pause(ctx context.Context, cli *clientv3.Client, l Layout, rec PauseRecord) (int64, error) {
	v, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	resp, err := cli.Put(clientv3.WithRequireLeader(ctx), l.PauseKey(), string(v))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// Resume deletes the pause key and reports whether the election was
// paused.
func Resume(ctx context.Context, cli *clientv3.Client, l Layout) (bool, error) {
	resp, err := cli.Delete(clientv3.WithRequireLeader(ctx), l.PauseKey())
	if err != nil {
		return false, err
	}
	return resp.Deleted > 0, nil
}

// WaitIdle waits until every term created before rev has ended: its
// queue key and sentinel gone and its record gone (docs/design.md,
// "Pause"). A term deletes its record only once its child and every
// descendant are gone; a term whose lease ended without its term deleting
// its record, WaitIdle judges by the rule a successor follows
// (clearEnded), so a lease that ended early does not count as a child
// gone, and leaves the record to the next candidate: pause may only read
// records. It returns the leases of the terms still there, and no
// error, once ctx's deadline passes first.
func WaitIdle(ctx context.Context, cli *clientv3.Client, l Layout, rev int64) ([]clientv3.LeaseID, error) {
	c := judge(cli)
	var left []clientv3.LeaseID
	judged := map[clientv3.LeaseID]bool{} // ended terms whose children are known gone
	expired := func(err error) bool {
		return errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	for {
		v, err := readOlder(ctx, cli, l, rev)
		switch {
		case expired(err):
			return left, nil
		case err != nil:
			return nil, err
		}
		c.see(v.header)
		maps.DeleteFunc(v.leases, func(id clientv3.LeaseID, _ bool) bool { return judged[id] })
		left = slices.Collect(maps.Keys(v.leases))
		if len(left) == 0 {
			return nil, nil
		}
		ended := slices.DeleteFunc(v.ended(), func(e endedTerm) bool { return judged[e.lease] })
		if len(ended) > 0 {
			type result struct {
				lease clientv3.LeaseID
				err   error
			}
			results := make(chan result, len(ended))
			for _, e := range ended {
				go func() { results <- result{e.lease, c.clearEnded(ctx, e)} }()
			}
			for range ended {
				r := <-results
				switch {
				case r.err == nil:
					judged[r.lease] = true
				case !expired(r.err):
					return nil, r.err
				}
			}
			continue
		}
		if !sleep(ctx, resignPoll) {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return left, nil
			}
			return nil, ctx.Err()
		}
	}
}

// judge is a clearer that only judges (clearer.judgeOnly), outside a
// campaign: for pause and resign, whose roles may only read records. It
// learns etcd's raft term from the answers it reads.
func judge(cli *clientv3.Client) *clearer {
	c := &clearer{
		cli: cli,
		req: func(ctx context.Context, f func(context.Context) error) error {
			rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), resignPoll*50)
			defer cancel()
			return f(rctx)
		},
		now: bootclock.Now, log: hclog.NewNullLogger(), ttl: DefaultTTL,
		logEvery: time.Hour, judgeOnly: true,
	}
	var raft atomic.Int64
	c.see = func(h *pb.ResponseHeader) {
		if h != nil {
			raise(&raft, int64(h.RaftTerm))
		}
	}
	c.known = func() uint64 { return uint64(raft.Load()) }
	return c
}

// older is what readOlder found of the terms created before a revision.
type older struct {
	view
	header *pb.ResponseHeader
}

// readOlder reads the queue keys, sentinels and records created before
// rev, whole, in one read.
func readOlder(ctx context.Context, cli *clientv3.Client, l Layout, rev int64) (older, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMaxCreateRev(rev - 1)}
	keys := append(slices.Clip(opts), clientv3.WithKeysOnly())
	resp, err := cli.Txn(clientv3.WithRequireLeader(ctx)).
		Then(clientv3.OpGet(l.QueuePrefix(), keys...), clientv3.OpGet(l.SentinelPrefix(), keys...), clientv3.OpGet(l.RecordPrefix(), opts...)).
		Commit()
	if err != nil {
		return older{}, err
	}
	o := older{view: view{rev: resp.Header.Revision, n: 1}, header: resp.Header}
	o.scan(l, resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs, resp.Responses[2].GetResponseRange().Kvs)
	return o, nil
}

// paused is the error for a pause found at revision rev.
func paused(rev int64) error { return fmt.Errorf("%w (at revision %d)", ErrPaused, rev) }

// awaitResume waits, holding no lease, until the pause the last term of
// this candidate ended on is gone: a watch of the pause key from the read
// that finds it, and the read again every T/2. Under NoWait, or once ctx
// ends, it gives an error wrapping ErrPaused.
func (c *Campaigner) awaitResume(ctx context.Context) error {
	if !c.paused.Load() {
		return nil
	}
	key := c.cfg.Layout.PauseKey()
	logged := false
	for {
		var resp *clientv3.GetResponse
		err := retry(ctx, func() error {
			return c.request(ctx, c.cfg.RequestTimeout, func(rctx context.Context) (err error) {
				resp, err = c.cfg.Client.Get(rctx, key, clientv3.WithKeysOnly())
				return err
			})
		})
		if err != nil {
			if Permanent(err) {
				return err
			}
			return fmt.Errorf("%w: waiting for a resume: %w", ErrPaused, ctx.Err())
		}
		if len(resp.Kvs) == 0 {
			c.paused.Store(false)
			c.log.Info("election resumed; campaigning")
			return nil
		}
		if c.cfg.NoWait {
			return paused(resp.Kvs[0].ModRevision)
		}
		if o := c.cfg.Observer; o != nil {
			o.Paused()
		}
		if !logged {
			c.log.Info("election paused; waiting for etcdlead resume", "key", key)
			logged = true
		}
		// The watch tells of the resume at once; the read every T/2 is
		// what tells etcd still answers (the candidate's health), and
		// finds a resume that a silently stalled watch would hold back.
		wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), c.cfg.Timing.TTL/2)
		for w := range c.cfg.Client.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut()) {
			if w.Err() != nil || len(w.Events) > 0 {
				break
			}
		}
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("%w: waiting for a resume: %w", ErrPaused, ctx.Err())
		}
		// Deleted, the watch broke, or it is time to read: read again.
	}
}
