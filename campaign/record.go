package campaign

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A term's record (docs/design.md, "The term record") is the one key of a
// term that is on no lease. Its lease can end while the term's child
// still runs: an etcd raft leader that resumes after a pause longer than
// the TTL revokes leases a newer raft leader renewed (the sweep), and an
// operator can revoke one by hand. The record says that the child may
// still run until one of two things takes it away:
//
//   - its own term, in one transaction with its queue key and sentinel,
//     once its child and every descendant are gone (Term.Revoke);
//   - a successor (clearEnded), once etcd said the lease is gone and, when
//     etcd's raft term moved past the one the record names, the record's
//     TTL and mu have passed since: every renewal the term was credited
//     was sent before the lease's end, so its deadline, and its child, are
//     past by then.
//
// A term starts its child only after a read shows no record older than
// its own (startRead), so nothing a restart, a sweep or a broken watch
// forgets can let a child start beside one that may still run.

// TermRecord is what a term's record holds.
type TermRecord struct {
	// Key is the term's queue key.
	Key string `json:"key"`
	// TTL is the lease's TTL as etcd granted it, in seconds: how long the
	// term's child may run after its last credited renewal.
	TTL int64 `json:"ttl"`
	// RaftTerm is the highest raft term etcd named to the candidate before
	// the grant was sent: only a raft leader of a later term can have
	// ended the lease early (learnTerm).
	RaftTerm uint64 `json:"raft_term"`
	// Holders is the election's number of holders, when more than one.
	Holders int `json:"holders,omitempty"`
	// Slot is the slot the term took, with more than one holder: the slot
	// stays taken until the record goes (docs/design.md, "More than one
	// holder").
	Slot *int `json:"slot,omitempty"`
	// Containment is what holds the term's child together
	// (Config.Containment), for status to show.
	Containment string `json:"containment,omitempty"`
}

func (r TermRecord) value() string {
	b, _ := json.Marshal(r) // a struct of strings and numbers always marshals
	return string(b)
}

// sameTerm says whether value is r's record, whatever slot it names: a
// slot claim rewrites the record with its slot and nothing else.
func (r TermRecord) sameTerm(value []byte) bool {
	got, ok := ParseRecord(value)
	got.Slot, r.Slot = nil, nil
	return ok && got == r
}

// ParseRecord reads a record's value; ok is false when it is not one
// etcdlead writes (put by hand: its TTL is then unknown).
func ParseRecord(value []byte) (rec TermRecord, ok bool) {
	if json.Unmarshal(value, &rec) != nil || rec.Key == "" || rec.TTL <= 0 || rec.TTL > int64(MaxTTL/time.Second) {
		return TermRecord{}, false
	}
	return rec, true
}

// electionTimeoutFor bounds etcd's election timeout by the least TTL
// etcd grants, minTTL seconds. A raft leader that does not know yet that
// it was replaced may credit a renewal for up to an election timeout; the
// hold after a raft leader change includes it (clearer.electionTimeout).
// etcd takes a lease TTL below ⌈⌊3·ticks/2⌋·heartbeat⌉ seconds up to that,
// and refuses to run with an election timeout (ticks·heartbeat) under
// five heartbeats, so minTTL ≥ 1.5·ticks·heartbeat − heartbeat/2 ≥ 1.4
// election timeouts. At etcd's defaults (1 s, 100 ms) minTTL is 2 s.
func electionTimeoutFor(minTTL int64) time.Duration {
	return (time.Duration(minTTL)*time.Second*5 + 6) / 7
}

// EndedWaitLimit bounds how long a campaign may wait for an ended term of
// TTL ttl before it takes its record away: its lease may outlive the
// candidate's first read by a TTL, and the hold after a raft leader change
// is a TTL and mu more. margin is the candidate's fence margin. etcd's
// election timeout, which mu holds, is bounded here without asking etcd:
// by its defaults' bound, or, where etcd granted the candidate's own TTL
// as asked, by what that grant says of it (electionTimeoutFor).
func EndedWaitLimit(ttl, margin time.Duration) time.Duration {
	et := max(electionTimeoutFor(2), electionTimeoutFor(int64(ttl/time.Second)))
	return 2*ttl + et + max(margin, DefaultFenceMargin(ttl))
}

// endedTerm is an older term that a read showed by its record alone: its
// queue key and sentinel are gone, with its lease or by hand.
type endedTerm struct {
	lease clientv3.LeaseID
	key   string // the record's
	mod   int64  // the record's mod revision, as read
	rec   TermRecord
	known bool // rec is one etcdlead wrote
}

// queueKey names the term for the log: its queue key, or its record's key
// when the record is not one etcdlead wrote.
func (e endedTerm) queueKey() string {
	if e.known {
		return e.rec.Key
	}
	return e.key
}

// clearer takes ended terms' records away (clearEnded). A campaign and
// pause's WaitIdle each make one.
type clearer struct {
	cli *clientv3.Client
	// req runs one request, bounded, and hedged by quiet.
	req   func(ctx context.Context, f func(context.Context) error) error
	quiet time.Duration
	now   func() time.Duration
	log   hclog.Logger
	// margin is the candidate's fence margin, 0 outside a campaign. The
	// hold adds mu to an ended term's TTL: etcd's election timeout and a
	// fence margin, which absorbs the difference in clock rates (the
	// larger of margin and the default for the record's TTL).
	margin time.Duration
	// ttl stands in for the TTL of a record that etcdlead did not write.
	ttl time.Duration
	// see and known feed and read the highest raft term etcd named.
	see   func(*pb.ResponseHeader)
	known func() uint64
	// waiting is told when an ended term's lease still lives (its keys were
	// deleted by hand).
	waiting func()
	// logEvery paces the lines about a wait that goes on.
	logEvery time.Duration
	// judgeOnly leaves the record in place once its term's child is known
	// gone: for pause, which may not write records.
	judgeOnly bool
	// et is electionTimeout's answer once known, in nanoseconds.
	et atomic.Int64
}

// clearEnded is step 4 of docs/design.md, "One term, step by step", for an
// ended term: it returns once e's record is gone, taken away here or by
// another. It first waits until etcd says e's lease is gone (leaseGone): its keys may
// have been deleted by hand while it lives. If etcd's raft term moved past
// the one the record names (or the record is not one etcdlead wrote), the
// lease may have been swept while its child runs, up to its deadline: it
// holds the record until the record's TTL and mu have passed since that
// answer (endedHold). Then it deletes the record if it is still as read
// (removeRecord), unless it only judges (clearer.judgeOnly). Errors are the context's or a permanent refusal.
func (c *clearer) clearEnded(ctx context.Context, e endedTerm) error {
	if err := c.leaseGone(ctx, e); err != nil {
		return err
	}
	at := c.now()
	if !e.known || c.known() > e.rec.RaftTerm {
		ttl := c.ttl
		if e.known {
			ttl = time.Duration(e.rec.TTL) * time.Second
		}
		et, err := c.electionTimeout(ctx)
		if err != nil {
			return err
		}
		done, err := c.endedHold(ctx, e, at+ttl+et+max(c.margin, DefaultFenceMargin(ttl)))
		if done || err != nil {
			return err
		}
	}
	if c.judgeOnly {
		return nil
	}
	return c.removeRecord(ctx, e)
}

// leaseGone asks etcd about e's lease until it answers that it is gone.
// Only TTL -1 is gone: the TTL is truncated to whole seconds, so a live
// lease with under a second left answers 0.
func (c *clearer) leaseGone(ctx context.Context, e endedTerm) error {
	var logged time.Duration
	for {
		var ttl int64
		err := retry(ctx, func() (err error) {
			ttl, err = ask(c, ctx, func(rctx context.Context) (int64, error) {
				resp, err := c.cli.TimeToLive(rctx, e.lease)
				if err != nil {
					return 0, err
				}
				c.see(resp.ResponseHeader)
				return resp.TTL, nil
			})
			return err
		})
		if err != nil {
			return err
		}
		if ttl == -1 {
			return nil
		}
		if now := c.now(); logged == 0 || now-logged >= c.logEvery {
			msg := "still waiting for predecessor lease to end"
			if logged == 0 {
				msg = "waiting for predecessor lease to end"
				if c.waiting != nil {
					c.waiting()
				}
			}
			// The TTL is truncated to whole seconds: at most one more.
			c.log.Info(msg, "key", e.queueKey(), "lease", leaseHex(e.lease), "at_most", time.Duration(ttl+1)*time.Second)
			logged = now
		}
		if !sleep(ctx, recordPoll) {
			return ctx.Err()
		}
	}
}

// electionTimeout bounds etcd's election timeout by the TTL etcd grants
// when asked for 1 s (electionTimeoutFor). It asks once and remembers the
// answer; the lease it was given holds nothing and is revoked at once (or
// ends by itself within that TTL). Every member is taken to run with the
// same election timeout as the one that answers.
func (c *clearer) electionTimeout(ctx context.Context) (time.Duration, error) {
	if d := c.et.Load(); d > 0 {
		return time.Duration(d), nil
	}
	var minTTL int64
	err := retry(ctx, func() (err error) {
		minTTL, err = ask(c, ctx, func(rctx context.Context) (int64, error) {
			resp, err := c.cli.Grant(rctx, 1)
			if err != nil {
				return 0, err
			}
			_, _ = c.cli.Revoke(rctx, resp.ID)
			return resp.TTL, nil
		})
		return err
	})
	if err != nil {
		return 0, err
	}
	d := electionTimeoutFor(minTTL)
	c.et.Store(int64(d))
	return d, nil
}

// ask is one request of c's whose answer is a value: req may run f more
// than once at a time (hedged), and the first answer counts.
func ask[T any](c *clearer, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	var (
		mu  sync.Mutex
		got T
		ok  bool
	)
	err := c.req(ctx, func(rctx context.Context) error {
		v, err := f(rctx)
		if err == nil {
			mu.Lock()
			if !ok {
				got, ok = v, true
			}
			mu.Unlock()
		}
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	return got, err
}

// endedHold waits until the boot-clock time until, or until e's record is
// gone or rewritten (done): its own term took it away once its child was
// gone, or another successor did.
func (c *clearer) endedHold(ctx context.Context, e endedTerm, until time.Duration) (done bool, err error) {
	c.log.Info("a term ended after a raft leader change, or its record is not etcdlead's: its child may run until its deadline; "+
		"waiting out its TTL before taking its record away", "record", e.key, "in", (until - c.now()).Round(time.Millisecond))
	for {
		left := until - c.now()
		if left <= 0 {
			return false, nil
		}
		if !sleep(ctx, min(left, recordPoll)) {
			return false, ctx.Err()
		}
		gone, err := ask(c, ctx, func(rctx context.Context) (bool, error) {
			resp, err := c.cli.Get(rctx, e.key, clientv3.WithKeysOnly())
			if err != nil {
				return false, err
			}
			return len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != e.mod, nil
		})
		if Permanent(err) {
			return false, err
		}
		if gone {
			return true, nil
		}
	}
}

// removeRecord deletes e's record if it is still as read: a record put
// again since (by hand) is not the one judged.
func (c *clearer) removeRecord(ctx context.Context, e endedTerm) error {
	var removed bool
	err := retry(ctx, func() (err error) {
		removed, err = ask(c, ctx, func(rctx context.Context) (bool, error) {
			resp, err := c.cli.Txn(rctx).
				If(clientv3.Compare(clientv3.ModRevision(e.key), "=", e.mod)).
				Then(clientv3.OpDelete(e.key)).
				Commit()
			if err != nil {
				return false, err
			}
			return resp.Succeeded, nil
		})
		return err
	})
	if err == nil && removed {
		c.log.Info("ended term's record taken away", "record", e.key, "lease", leaseHex(e.lease))
	}
	return err
}

// knownTerm is the highest raft term any answer to this client named.
func (c *Campaigner) knownTerm() uint64 { return c.renewals.RaftTerm() }

// learnTerm asks etcd for its raft term when no answer has named one yet,
// so that the grant that follows has a term to record (TermRecord.RaftTerm): a linearizable
// read, which a member answers in its raft leader's term. An etcd that
// cannot be reached fails the grant as it would have, with its cause. A
// refusal leaves the term at 0, which makes every term later: the safe
// side (a role that may not read the pause key fails the campaign
// transaction anyway, with a line that names it).
func (c *Campaigner) learnTerm(ctx context.Context) error {
	if c.knownTerm() > 0 {
		return nil
	}
	err := c.request(ctx, c.cfg.RequestTimeout, func(rctx context.Context) error {
		resp, err := c.cfg.Client.Get(rctx, c.cfg.Layout.PauseKey(), clientv3.WithCountOnly())
		if err == nil {
			c.renewals.SeeHeader(resp.Header)
		}
		return err
	})
	if err != nil && Permanent(err) {
		return nil
	}
	return err
}
