package campaign

import (
	"context"
	"errors"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// An early end after a raft leader change (docs/design.md, "An early end
// after a raft leader change").
//
// An etcd raft leader member paused whole for longer than a TTL revokes,
// as it resumes, every lease it last knew of, although a newer raft leader
// renewed them since (docs/design.md, "What stays bounded"). The term that
// leads then loses its lease while its child runs, as it may until its
// deadline; a waiter that saw that lease go could not tell it from a
// graceful revoke, and would start beside that child.
//
// Only a raft leader that applied a lease's grant can revoke it so, and
// only once it has been replaced: once the raft term has moved past the
// one known before the grant was sent. So each term records that term in
// its sentinel, with its TTL (record.grant); a term that ends gracefully
// after such a move says first that its child is gone (release); and a
// waiter that sees a sentinel deleted, its lease gone, without that word,
// after such a move, waits that term's TTL from when it saw the delete
// before it starts (earlyEnd, Term.holdUntil). Every renewal that term was
// credited was sent before the revoke, so by then its deadline, and its
// fence, have passed.

// seeTerm records that etcd's raft term is at least h's.
func (r *renewals) seeTerm(h *pb.ResponseHeader) {
	if h != nil {
		raise(&r.raftTerm, int64(h.RaftTerm))
	}
}

// knownTerm is the highest raft term any answer to this client named.
func (c *Campaigner) knownTerm() uint64 { return uint64(c.renewals.raftTerm.Load()) }

// raftMoved reports whether the raft term known now is past the one the
// term's grant recorded: only then can a resumed raft leader have ended
// its lease early.
func (t *Term) raftMoved() bool { return t.c.knownTerm() > t.rec.grant.term }

// learnTerm asks etcd for its raft term when no answer has named one yet,
// so that the grant that follows has a term to record: a linearizable
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
			c.renewals.seeTerm(resp.Header)
		}
		return err
	})
	if err != nil && Permanent(err) {
		return nil
	}
	return err
}

// release writes into the term's sentinel that its child is gone, before
// its revoke, when the raft term has moved past the one its grant
// recorded: the revoke would otherwise look like an early end to the
// waiter behind it, which would wait out the TTL. The term learns of a
// new raft term from its renewals' answers; when none was credited
// lately (a fence after an etcd election, a waiter that renews every
// T/3) it cannot tell, and releases all the same. A term whose lease is
// known gone has nothing to release. It is asked again every quietAfter
// while unanswered, for at most half the request timeout; it
// compares the sentinel's create revision and lease, so it never writes
// a sentinel that is no longer the term's. Callers release only once the
// child's processes are all gone.
func (t *Term) release() {
	fresh := t.c.cfg.Now()-t.lastSent() <= 2*t.c.renewEvery()
	if t.Rev == 0 || fresh && !t.raftMoved() || errors.Is(context.Cause(t.ctx), ErrLeaseLost) {
		return
	}
	rec := t.rec
	rec.released = true
	ctx, cancel := context.WithTimeout(context.Background(), t.c.cfg.RequestTimeout/2)
	defer cancel()
	_, err := hedged(ctx, quietAfter(t.TTL), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) error {
			_, err := t.c.cfg.Client.Txn(rctx).
				If(clientv3.Compare(clientv3.CreateRevision(t.Sentinel), "=", t.Rev),
					clientv3.Compare(clientv3.LeaseValue(t.Sentinel), "=", t.Lease)).
				Then(clientv3.OpPut(t.Sentinel, rec.String(), clientv3.WithLease(t.Lease))).
				Commit()
			return err
		})
	})
	if err != nil {
		t.c.log.Debug("could not record the term's release; the next term will wait out its TTL", "error", err)
	}
}

// earlyEnd is how long, from when it was seen, a waiter waits before it
// starts after ev, should ev's lease be gone: the TTL that the deleted
// sentinel records (at least own, the waiter's own TTL: a term further
// ahead, swept at the same moment, has not been seen go) when its grant
// came before the raft term known as ev arrives (h's, or an earlier
// answer's) and it does not say released; own when the delete carries no
// previous value, which the watch asked for (etcd leaves it out once its
// revision is compacted): how that term ended is unknown; else 0. A
// sentinel that records no grant is an older etcdlead's, or not a
// sentinel: 0, as before.
func (c *Campaigner) earlyEnd(ev *clientv3.Event, h *pb.ResponseHeader, own time.Duration) time.Duration {
	if ev.Type != clientv3.EventTypeDelete {
		return 0
	}
	if ev.PrevKv == nil {
		return own
	}
	g, ok := grantOf(ev.PrevKv.Value)
	if !ok || releasedOf(ev.PrevKv.Value) {
		return 0
	}
	c.renewals.seeTerm(h)
	if c.knownTerm() <= g.term {
		return 0
	}
	return max(g.ttl, own)
}

// Why a term holds its start (holdUntil).
const (
	aheadEnded = "the lease ahead ended after a raft leader change, and its term did not say its child was gone: waiting out its TTL before starting"
	sweptEnded = "a term of the election ended after a raft leader change since this candidate last looked, and did not say its child was gone: waiting out its TTL before starting"
	notSeen    = "the election's history since this candidate last looked is not at hand: waiting out its TTL before starting, as a term may have ended early in it"
)

// holdUntil waits until the boot-clock time until, and says why in the
// log: a term ended early after a raft leader change (earlyEnd), or may
// have. Until then a Revoke of this term waits too (awaitHold). A context
// that ends first gives the wait's error.
func (t *Term) holdUntil(ctx context.Context, until time.Duration, key, why string) error {
	left := until - t.c.cfg.Now()
	if left <= 0 {
		return nil
	}
	raise(&t.hold, int64(until))
	t.c.log.Info(why, "key", key, "in", left.Round(time.Millisecond))
	if !sleep(ctx, left) {
		return t.waitErr(ctx)
	}
	return nil
}

// awaitHold returns once the term's hold, if any, is over: the term's
// sentinel must outlive the wait it holds for the candidates behind it,
// which would otherwise find neither it nor the term it waits out.
func (t *Term) awaitHold() {
	left := time.Duration(t.hold.Load()) - t.c.cfg.Now()
	if left <= 0 {
		return
	}
	t.c.log.Info("the term ends while it waits out an early end ahead: revoking once that wait is over", "in", left.Round(time.Millisecond))
	sleep(context.Background(), left)
}

// noteEarly remembers that a term of this candidate, on lease, ended early,
// seen at boot-clock time at: Campaign sits out a TTL from then.
func (c *Campaigner) noteEarly(lease clientv3.LeaseID, at time.Duration) {
	c.own.Lock()
	defer c.own.Unlock()
	c.own.early, c.own.at = lease, at
}

// maxOwn bounds the own leases a replay passes over: beyond it the oldest
// are forgotten, and their ends judged as any other's, the safe side.
const maxOwn = 64

// noteTerm remembers the lease of a new term of this candidate.
func (c *Campaigner) noteTerm(lease clientv3.LeaseID) {
	c.own.Lock()
	defer c.own.Unlock()
	if len(c.own.leases) >= maxOwn {
		c.own.leases = slices.Delete(c.own.leases, 0, 1)
	}
	c.own.leases = append(c.own.leases, lease)
}

// ownSince is what a replay needs of this candidate's own terms: the
// leases of those since the last replay, which the term's replay now
// takes on (only the term's own is kept), and the last that ended early
// among them, with when that was seen (0 when none did).
func (t *Term) ownSince() (leases []clientv3.LeaseID, early clientv3.LeaseID, at time.Duration) {
	c := t.c
	c.own.Lock()
	defer c.own.Unlock()
	leases, c.own.leases = c.own.leases, []clientv3.LeaseID{t.Lease}
	if slices.Contains(leases, c.own.early) {
		early, at = c.own.early, c.own.at
	}
	return leases, early, at
}

// startHold is a hold from a replay (Term.replay): until when, for which
// key, and why.
type startHold struct {
	until time.Duration
	key   string
	why   string
}

// sweptEnd is one sentinel delete a replay met: its revision, its key, when
// it was heard, and how long to wait after that (earlyEnd).
type sweptEnd struct {
	rev   int64
	key   string
	heard time.Duration
	early time.Duration
}

// sweptUntil is the hold that ends, seen in a replay, ask for. A delete is
// waited out from when it was heard, except those at or before own, the
// delete of a term of this candidate that ended early (0: none did): those
// came before ownAt, when that end was seen, from which the candidate has
// sat out a TTL already.
func sweptUntil(ends []sweptEnd, own int64, ownAt time.Duration) startHold {
	var h startHold
	for _, e := range ends {
		if e.early <= 0 {
			continue
		}
		from := e.heard
		if e.rev <= own {
			from = min(from, ownAt)
		}
		if from+e.early > h.until {
			h = startHold{until: from + e.early, key: e.key, why: sweptEnded}
		}
	}
	return h
}

// replay is what a term learns, before it waits, of the terms that ended
// since this candidate last looked at the election (Campaigner.judged):
// the deletes of sentinels since then, with their previous values, up to
// the term's own. One that ended early after a raft leader change
// (earlyEnd) may have been swept with its child still running, and nothing
// still in etcd says so: the candidate that campaigns after such a sweep
// (after a step-down, when the sweep's own deletes empty the election;
// retrying through the etcd election that came before it) would otherwise
// find nothing ahead and start beside that child. The hold it returns is
// for after the wait; it holds the term's revoke at once. History that etcd
// compacted, or a watch that breaks, is held for the TTL: what ended in it
// is unknown. A first term has nothing to replay. The watch is the term's
// own, asked after as a wait's are; the term's own sentinel, put at its
// create revision, ends it.
func (t *Term) replay(ctx context.Context) (startHold, error) {
	from := t.c.judged.Load()
	if from == 0 || from >= t.Rev {
		raise(&t.c.judged, t.Rev)
		return startHold{}, nil
	}
	own, early, ownAt := t.ownSince()
	l := t.c.cfg.Layout
	mine := func(key string) bool {
		return slices.ContainsFunc(own, func(id clientv3.LeaseID) bool { return key == l.SentinelKey(id) })
	}
	ws, stop := t.watchAll(ctx, []string{l.SentinelPrefix()}, from, clientv3.WithPrefix(), clientv3.WithPrevKV())
	defer stop()
	// The hold holds the revoke from now; the history up to the term's
	// own revision is judged.
	judged := func(h startHold) (startHold, error) {
		raise(&t.hold, int64(h.until))
		raise(&t.c.judged, t.Rev)
		return h, nil
	}
	var ends []sweptEnd
	var ownRev int64
	for {
		var w watched
		select {
		case w = <-ws:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			return startHold{}, t.waitErr(ctx)
		}
		now := t.c.cfg.Now()
		if err := w.resp.Err(); !w.ok || err != nil {
			t.c.log.Debug("could not replay the election's history", "from", from, "error", err)
			return judged(startHold{until: now + t.TTL, key: t.Sentinel, why: notSeen})
		}
		for _, ev := range w.resp.Events {
			if ev.Kv.ModRevision >= t.Rev {
				return judged(sweptUntil(ends, ownRev, ownAt))
			}
			if ev.Type != clientv3.EventTypeDelete || ev.PrevKv != nil && !l.ValidSentinel(ev.PrevKv) {
				continue
			}
			key := string(ev.Kv.Key)
			if mine(key) {
				// A term of this candidate, whose child is gone: no sign
				// of another's, unless it ended early.
				if early != 0 && key == l.SentinelKey(early) {
					ownRev = ev.Kv.ModRevision
				}
				continue
			}
			ends = append(ends, sweptEnd{rev: ev.Kv.ModRevision, key: key, heard: now, early: t.c.earlyEnd(ev, &w.resp.Header, t.TTL)})
		}
	}
}
