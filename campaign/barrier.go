package campaign

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leasePoll is how often a candidate asks whether a lease whose keys are
// gone, but which still lived when asked, has ended yet. etcd offers no
// event for a lease's end once its keys are gone (deleted by hand), and
// only the candidate that watched those keys asks.
const leasePoll = 250 * time.Millisecond

// startReadPage is how many keys below its own a start read reads at first with one
// holder: enough for the nearest term and whether a second one waits,
// unless foreign keys are in the way, in which case the start read reads on past
// them. With N holders it reads N-1 more.
const startReadPage = 4

// olderTerm is another olderTerm as one read showed it.
type olderTerm struct {
	key   string
	rev   int64 // create revision
	lease clientv3.LeaseID
}

func olderTermOf(kv *mvccpb.KeyValue) *olderTerm {
	return &olderTerm{key: string(kv.Key), rev: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease)}
}

// view is what one read showed below this term's create revision, for an
// election of n holders.
type view struct {
	rev    int64        // the read's revision
	n      int          // holders
	qs     []*olderTerm // the n nearest valid queue keys below ours, nearest first
	ss     []*olderTerm // the n nearest valid sentinels below ours, nearest first
	queued int          // valid queue keys below ours (exact after enqueue, else counted up to n+1)
	terms  int          // valid sentinels below ours (likewise)
	// older is the number of terms, told apart by lease, that the valid
	// keys below ours belong to, and leases is their set. Both are exact
	// when older < n: a page is read on past foreign keys until it holds
	// n+1 valid ones or ends.
	older  int
	leases map[clientv3.LeaseID]bool
	// bare are the leases of the valid queue keys below ours whose
	// sentinel the read did not show: their term's sentinel was deleted by
	// hand, or it is an older etcdlead's. Its number of holders is then
	// unknown, so with n > 1 it is taken for a term of one, which no other
	// may run beside (docs/design.md, "More than one holder"). Exact when
	// older < n, as the leases are.
	bare map[clientv3.LeaseID]bool
}

// moved reports whether ev changes what the term's key says of it: a
// delete, or a put that moves the key to another lease or creates it
// anew. A put that keeps both is the term's own rewrite of its sentinel
// when it takes a slot (campaign/slot.go, takeSlot): it would wake up to N
// waiters for nothing at every handoff.
func (p *olderTerm) moved(ev *clientv3.Event) bool {
	return ev.Type == clientv3.EventTypeDelete || clientv3.LeaseID(ev.Kv.Lease) != p.lease || ev.Kv.CreateRevision != p.rev
}

// nearestOf returns the nearest term of a list, or nil.
func nearestOf(ts []*olderTerm) *olderTerm {
	if len(ts) == 0 {
		return nil
	}
	return ts[0]
}

// clear is the start condition's view part: fewer than n older terms
// left, none with one holder, and none of an unknown number of holders.
func (v view) clear() bool { return v.older < v.n && len(v.bare) == 0 }

// isFront reports that this term is next: at most n terms are ahead.
func (v view) isFront() bool { return v.queued <= v.n && v.terms <= v.n }

func (v view) ahead() string {
	if b := v.bareKey(); b != "" && v.older < v.n {
		return b + " is ahead, and its number of holders is unknown (its sentinel is gone)"
	}
	if v.n > 1 {
		return fmt.Sprintf("%d older terms hold or wait, for %d holders", v.older, v.n)
	}
	if q := nearestOf(v.qs); q != nil {
		return q.key + " is ahead"
	}
	return fmt.Sprintf("an earlier term's lease %s is still alive", leaseHex(v.ss[0].lease))
}

// bareKey is the nearest queue key of v.bare, or "".
func (v view) bareKey() string {
	for _, q := range v.qs {
		if v.bare[q.lease] {
			return q.key
		}
	}
	return ""
}

// scan fills the view from keys sorted by create revision, in either order,
// all below ours.
func (v *view) scan(l Layout, queue, sentinels []*mvccpb.KeyValue) {
	v.leases = map[clientv3.LeaseID]bool{}
	v.ss, v.terms = v.nearest(l.ValidSentinel, sentinels)
	v.bare = nil
	for _, kv := range queue {
		if id := clientv3.LeaseID(kv.Lease); l.ValidQueueKey(kv) && !v.leases[id] {
			if v.bare == nil {
				v.bare = map[clientv3.LeaseID]bool{}
			}
			v.bare[id] = true
		}
	}
	v.qs, v.queued = v.nearest(l.ValidQueueKey, queue)
	v.older = len(v.leases)
}

// nearest returns the n nearest valid keys of kvs and how many are valid,
// and adds their leases to the view's set.
func (v *view) nearest(valid func(*mvccpb.KeyValue) bool, kvs []*mvccpb.KeyValue) ([]*olderTerm, int) {
	var ts []*olderTerm
	count := 0
	for _, kv := range kvs {
		if !valid(kv) {
			continue
		}
		count++
		v.leases[clientv3.LeaseID(kv.Lease)] = true
		ts = append(ts, olderTermOf(kv))
	}
	slices.SortFunc(ts, func(a, b *olderTerm) int { return cmp.Compare(b.rev, a.rev) })
	return ts[:min(len(ts), v.n)], count
}

// watched is what a waiter watches: the sentinels of the n nearest terms,
// and the queue key of each of them whose sentinel the read did not show
// (it is gone, or the term is an older etcdlead's). The n nearest older
// terms change only when one of them goes, so a term that goes further
// ahead wakes nobody it need not: a handoff wakes at most n waiters.
func (v view) watched() []*olderTerm {
	out := slices.Clone(v.ss)
	for _, q := range v.qs {
		if !slices.ContainsFunc(v.ss, func(s *olderTerm) bool { return s.lease == q.lease }) {
			out = append(out, q)
		}
	}
	return out
}

// keylessSentinels are the sentinels among the nearest whose queue key the read did
// not show: their term's queue key was deleted while its lease lives.
func (v view) keylessSentinels() []*olderTerm {
	var out []*olderTerm
	for _, s := range v.ss {
		if !slices.ContainsFunc(v.qs, func(q *olderTerm) bool { return q.lease == s.lease }) {
			out = append(out, s)
		}
	}
	return out
}

// enqueue is step 2 of docs/design.md, "One term, step by step": one
// transaction creates the queue key and the sentinel, both only if absent,
// and reads both prefixes whole. Reads after a write in one transaction see
// it, so the answer holds this term's create revision and every older term,
// atomically.
func (t *Term) enqueue(ctx context.Context) (view, error) {
	l := t.c.cfg.Layout
	sorted := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)}
	// The resign key is read only to learn at once, before any child, that
	// the role may not read it: the term watches it from now on. The pause
	// is read to refuse a start while it lasts; a pause put later, the
	// guard hears.
	// The sentinels are read with their values, which say how many holders
	// each term was started with.
	reads := []clientv3.Op{clientv3.OpGet(l.QueuePrefix(), append(sorted, clientv3.WithKeysOnly())...), clientv3.OpGet(l.SentinelPrefix(), sorted...),
		clientv3.OpGet(l.ResignKey(), clientv3.WithKeysOnly()), clientv3.OpGet(l.PauseKey(), clientv3.WithKeysOnly())}
	reads = append(reads, t.c.readRun()...)
	var resp *clientv3.TxnResponse
	err := t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) (err error) {
		resp, err = t.c.cfg.Client.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(t.Key), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(t.Sentinel), "=", 0)).
			Then(append([]clientv3.Op{clientv3.OpPut(t.Key, t.c.cfg.ID, clientv3.WithLease(t.Lease)),
				clientv3.OpPut(t.Sentinel, t.rec.String(), clientv3.WithLease(t.Lease))}, reads...)...).
			// Else: an earlier attempt of this very transaction committed
			// but its answer was lost; the keys are ours all the same.
			Else(reads...).
			Commit()
		return err
	})
	if err != nil {
		return view{}, fmt.Errorf("campaign transaction: %w", err)
	}
	t.c.renewals.seeTerm(resp.Header)
	rs := resp.Responses[len(resp.Responses)-len(reads):]
	queue, sentinels := rs[0].GetResponseRange().Kvs, rs[1].GetResponseRange().Kvs
	own := func(kvs []*mvccpb.KeyValue, key string) *mvccpb.KeyValue {
		for _, kv := range kvs {
			if string(kv.Key) == key && clientv3.LeaseID(kv.Lease) == t.Lease {
				return kv
			}
		}
		return nil
	}
	k, s := own(queue, t.Key), own(sentinels, t.Sentinel)
	if k == nil || s == nil || k.CreateRevision != s.CreateRevision {
		return view{}, fmt.Errorf("campaign transaction: %w", ErrKeyDeleted)
	}
	t.Rev = k.CreateRevision
	if p := rs[3].GetResponseRange().Kvs; len(p) > 0 {
		return view{}, paused(p[0].ModRevision)
	}
	if len(rs) > 4 {
		if err := t.c.checkRun(rs[4].GetResponseRange().Kvs); err != nil {
			return view{}, err
		}
	}
	if err := t.agree(sentinels); err != nil {
		return view{}, err
	}
	v := view{rev: resp.Header.Revision, n: t.c.holders()}
	v.scan(l, below(queue, t.Rev), below(sentinels, t.Rev))
	return v, nil
}

// agree checks that every other term in the election was started with as
// many holders as this one (docs/design.md, "More than one holder"). Of
// two terms that disagree and live at once, the newer one sees the older
// one's sentinel here and refuses, before it can count the older terms
// by a rule the older ones do not follow.
func (t *Term) agree(sentinels []*mvccpb.KeyValue) error {
	for _, kv := range sentinels {
		if !t.c.cfg.Layout.ValidSentinel(kv) || string(kv.Key) == t.Sentinel {
			continue
		}
		if h := HoldersOf(kv.Value); h != t.c.holders() {
			return &HoldersError{Election: t.c.cfg.Layout.Prefix(), Want: t.c.holders(), Found: h, Sentinel: string(kv.Key)}
		}
	}
	return nil
}

func below(kvs []*mvccpb.KeyValue, rev int64) []*mvccpb.KeyValue {
	var out []*mvccpb.KeyValue
	for _, kv := range kvs {
		if kv.CreateRevision < rev {
			out = append(out, kv)
		}
	}
	return out
}

// wait is steps 3 and 4: watch the nearest older term (with N holders, the
// N nearest), and after each wake-up read again; leases whose keys went
// while they still lived are waited out too. It returns once a read shows
// nothing older (fewer than N older terms, none of them of an unknown
// number of holders) and every such lease is gone (enough of them that,
// with those the read showed, fewer than N remain).
func (t *Term) wait(ctx context.Context, v view) error {
	// The leases whose keys went while they lived, each true when its
	// term's number of holders is unknown (view.bare).
	pending := map[clientv3.LeaseID]bool{}
	// hold is the boot-clock time before which the term does not start,
	// and held the key of the term that set it (earlyEnd).
	var hold time.Duration
	var held string
	var logged view
	for !v.clear() {
		if v.isFront() {
			t.reportFront()
		}
		t.logWait(ctx, v, &logged)
		woke, unwatch, err := t.waitEvent(ctx, v)
		if err != nil {
			return t.waitErr(ctx)
		}
		// An early end ahead holds the term's revoke from now, should the
		// term end before it starts (awaitHold), its lease gone or not.
		for _, w := range woke {
			if w.early > 0 {
				raise(&t.hold, int64(w.at+w.early))
			}
		}
		// A wake-up asks etcd about the leases of the keys that moved and
		// reads again, both at once; the read decides.
		gone := make(chan map[clientv3.LeaseID]bool, 1)
		go func() { gone <- t.leasesGone(ctx, woke) }()
		next, lerr := t.startRead(ctx)
		t.c.log.Trace("start read answered")
		g := <-gone
		unwatch()
		for l, w := range woke {
			if g[l] {
				delete(pending, l)
				if w.early > 0 && w.at+w.early > hold {
					hold, held = w.at+w.early, w.key
				}
			} else {
				pending[l] = pending[l] || v.bare[l]
			}
		}
		if lerr != nil {
			return t.waitErr(ctx, lerr)
		}
		if len(woke) > 0 && t.c.holders() == 1 {
			// The nearest term ahead went, judged as it went; those
			// further ahead, the terms between judge (Campaigner.judged).
			raise(&t.c.judged, next.rev)
		}
		v = next
	}
	if err := t.barrier(ctx, v, pending); err != nil {
		return err
	}
	return t.holdUntil(ctx, hold, held, aheadEnded)
}

// logWait says what the candidate waits on, once per change.
func (t *Term) logWait(ctx context.Context, v view, last *view) {
	had := func(ts []*olderTerm, key string) bool {
		return slices.ContainsFunc(ts, func(o *olderTerm) bool { return o.key == key })
	}
	for _, q := range v.qs {
		if !had(last.qs, q.key) {
			t.c.log.Info("waiting on predecessor", "key", q.key, "id", t.idOf(ctx, q), "rev", q.rev)
		}
	}
	if v.n > 1 {
		for _, q := range v.qs {
			if v.bare[q.lease] && !last.bare[q.lease] {
				t.c.log.Info("predecessor's sentinel is gone: its number of holders is unknown, so waiting for its lease to end",
					"key", q.key, "lease", leaseHex(q.lease))
			}
		}
	}
	for _, s := range v.keylessSentinels() {
		if !had(last.ss, s.key) {
			t.c.log.Info("waiting for predecessor lease to end", "sentinel", s.key, "lease", leaseHex(s.lease))
			if o := t.c.cfg.Observer; o != nil {
				o.BarrierWait()
			}
		}
	}
	*last = v
}

// idOf is the id in a queue key, for the log: the reads of the wait take
// keys only, and this is asked once per predecessor, only when the line is
// logged. "" if it cannot be read, or the key is no longer that term's.
func (t *Term) idOf(ctx context.Context, q *olderTerm) string {
	var id string
	if !t.c.log.IsInfo() {
		return id
	}
	_ = t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) error {
		resp, err := t.c.cfg.Client.Get(rctx, q.key)
		if err == nil && len(resp.Kvs) == 1 && clientv3.LeaseID(resp.Kvs[0].Lease) == q.lease {
			id = string(resp.Kvs[0].Value)
		}
		return err
	})
	return id
}

// logLeaseLeft says that the wait for an older lease goes on, and for at
// most how long: one question to etcd, not retried, as only the log needs
// the answer.
func (t *Term) logLeaseLeft(ctx context.Context, id clientv3.LeaseID) {
	var ttl int64
	err := t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) error {
		resp, err := t.c.cfg.Client.TimeToLive(rctx, id)
		if err == nil {
			ttl = resp.TTL
		}
		return err
	})
	if err != nil || ttl < 0 {
		return // gone, or etcd did not answer: the wait says so itself
	}
	t.c.log.Info("still waiting for predecessor lease to end", "key", t.c.cfg.Layout.QueueKey(id),
		"lease", leaseHex(id), "at_most", time.Duration(ttl+1)*time.Second)
}

// wakeup is what woke a wait: the key that moved, when (boot clock), and
// how long after that the term may not start should the key's lease be
// gone (earlyEnd).
type wakeup struct {
	key   string
	at    time.Duration
	early time.Duration
}

// waitEvent watches the nearest older sentinel and, when it belongs to
// another term or is missing, the nearest older queue key, from just after
// the read; with N holders, those of the N nearest terms (view.watched). It
// returns the leases of the keys that moved (term.moved), and unwatch,
// which ends the watches: the caller calls it once it has sent what the
// wake-up asks. A broken watch (compaction, a lost etcd leader) returns
// nothing, its watches already ended: the caller reads again.
func (t *Term) waitEvent(ctx context.Context, v view) (woke map[clientv3.LeaseID]wakeup, unwatch func(), err error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	ts := v.watched()
	var keys []string
	for _, p := range ts {
		keys = append(keys, p.key)
	}
	// With the values the keys had, which say how a deleted sentinel's
	// term ended (earlyEnd).
	ws, stop := t.watchAll(wctx, keys, v.rev, clientv3.WithPrevKV())
	end := func() {
		stop()
		cancel()
	}
	defer func() {
		if woke == nil {
			end()
			unwatch = func() {}
		}
	}()
	var progress <-chan time.Time
	keyless := v.keylessSentinels()
	if len(keyless) > 0 {
		tick := time.NewTicker(t.c.cfg.LeaseWaitLog)
		defer tick.Stop()
		progress = tick.C
	}
	for {
		var w watched
		select {
		case w = <-ws:
		case <-progress:
			for _, s := range keyless {
				t.logLeaseLeft(ctx, s.lease)
			}
			continue
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if !w.ok {
			return nil, nil, nil
		}
		if err := w.resp.Err(); err != nil {
			t.c.log.Debug("predecessor watch interrupted; looking again", "error", err)
			return nil, nil, nil
		}
		if i := slices.IndexFunc(w.resp.Events, ts[w.i].moved); i >= 0 {
			t.c.log.Debug("predecessor moved; looking again", "key", keys[w.i])
			up := wakeup{key: keys[w.i], at: t.c.cfg.Now(), early: t.c.earlyEnd(w.resp.Events[i], &w.resp.Header, t.TTL)}
			return map[clientv3.LeaseID]wakeup{ts[w.i].lease: up}, end, nil
		}
	}
}

// startRead is the start read: one read-only transaction that checks this
// term's own keys (create revision and lease), reads the nearest valid
// queue key and sentinel below them (with N holders, the N nearest and
// whether one more is there), the pause and the run's records, retrying
// until ctx ends, and sent again every r while unanswered (hedged). It
// returns an error wrapping ErrKeyDeleted when the own keys are not intact,
// ErrPaused when the election is paused, or ErrRunDone when every slot
// ran the run id.
func (t *Term) startRead(ctx context.Context) (view, error) {
	l := t.c.cfg.Layout
	older := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(t.Rev - 1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)}
	n := t.c.holders()
	type read struct {
		v     view
		mine  bool
		pause int64 // the pause's revision, if the read found one
		done  error // the run id is recorded (ErrRunDone)
	}
	var r read
	err := retry(ctx, func() (err error) {
		r, err = hedged(ctx, quietAfter(t.TTL), func(ctx context.Context) (read, error) {
			var v view
			var mine bool
			var pause int64
			var done error
			err := t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) error {
				page := append(older, clientv3.WithLimit(int64(startReadPage+n-1)))
				resp, err := t.c.cfg.Client.Txn(rctx).
					If(t.intact()...).
					Then(append([]clientv3.Op{clientv3.OpGet(l.QueuePrefix(), page...), clientv3.OpGet(l.SentinelPrefix(), page...),
						clientv3.OpGet(l.PauseKey(), clientv3.WithKeysOnly())}, t.c.readRun()...)...).
					Commit()
				if err != nil {
					return err
				}
				t.c.renewals.seeTerm(resp.Header)
				v, mine = view{rev: resp.Header.Revision, n: n}, resp.Succeeded
				if !mine {
					return nil
				}
				if p := resp.Responses[2].GetResponseRange().Kvs; len(p) > 0 {
					pause = p[0].ModRevision
					return nil
				}
				if len(resp.Responses) > 3 {
					if done = t.c.checkRun(resp.Responses[3].GetResponseRange().Kvs); done != nil {
						return nil
					}
				}
				q, s := resp.Responses[0].GetResponseRange(), resp.Responses[1].GetResponseRange()
				v.scan(l, q.Kvs, s.Kvs)
				// Foreign keys filled a page: read on past them, at the same
				// revision, so that none can hide a valid key.
				if q.More && v.queued < n+1 {
					if q.Kvs, err = t.readAt(rctx, l.QueuePrefix(), v.rev, older); err != nil {
						return err
					}
				}
				if s.More && v.terms < n+1 {
					if s.Kvs, err = t.readAt(rctx, l.SentinelPrefix(), v.rev, older); err != nil {
						return err
					}
				}
				v.scan(l, q.Kvs, s.Kvs)
				return nil
			})
			return read{v, mine, pause, done}, err
		})
		return err
	})
	v, mine := r.v, r.mine
	switch {
	case err != nil:
	case !mine:
		err = fmt.Errorf("while waiting: %w", ErrKeyDeleted)
	case r.pause > 0:
		err = paused(r.pause)
	case r.done != nil:
		err = r.done
	}
	return v, err
}

func (t *Term) readAt(ctx context.Context, prefix string, rev int64, opts []clientv3.OpOption) ([]*mvccpb.KeyValue, error) {
	resp, err := t.c.cfg.Client.Get(ctx, prefix, append(opts, clientv3.WithRev(rev))...)
	if err != nil {
		return nil, err
	}
	return resp.Kvs, nil
}

// intact compares this term's keys with what it created: same create
// revision, same lease.
func (t *Term) intact() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(t.Key), "=", t.Rev),
		clientv3.Compare(clientv3.LeaseValue(t.Key), "=", t.Lease),
		clientv3.Compare(clientv3.CreateRevision(t.Sentinel), "=", t.Rev),
		clientv3.Compare(clientv3.LeaseValue(t.Sentinel), "=", t.Lease),
	}
}

// leasesGone asks etcd about each lease once (retrying errors). Only TTL -1
// means gone: the TTL is truncated to whole seconds, so a live lease with
// under a second left answers 0.
func (t *Term) leasesGone(ctx context.Context, leases map[clientv3.LeaseID]wakeup) map[clientv3.LeaseID]bool {
	out := map[clientv3.LeaseID]bool{}
	for id := range leases {
		gone, err := t.leaseGone(ctx, id)
		out[id] = gone && err == nil
	}
	return out
}

func (t *Term) leaseGone(ctx context.Context, id clientv3.LeaseID) (bool, error) {
	ttl, err := t.leaseTTL(ctx, id)
	return ttl == -1, err
}

// leaseTTL is the lease's remaining TTL in whole seconds, -1 once it is
// gone, asked until etcd answers, and again every r while unanswered
// (hedged).
func (t *Term) leaseTTL(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	var ttl int64
	err := retry(ctx, func() (err error) {
		ttl, err = hedged(ctx, quietAfter(t.TTL), func(ctx context.Context) (int64, error) {
			var ttl int64
			err := t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) error {
				resp, err := t.c.cfg.Client.TimeToLive(rctx, id)
				if err != nil {
					return err
				}
				t.c.log.Trace("predecessor lease looked up")
				ttl = resp.TTL
				return nil
			})
			return ttl, err
		})
		return err
	})
	return ttl, err
}

// barrier waits until every lease in pending is gone: a deleted key does
// not prove a stopped child; a gone lease does, because the holder's fence
// fires before etcd can expire it. With N holders it waits until fewer
// than N terms are left, counting those the last read v showed (which can
// only have become fewer since: nothing new can appear below this term)
// and the pending leases not among them; but a pending lease of a term
// whose number of holders is unknown (view.bare) it waits out whatever the
// count, as no other term may run beside a term of one.
func (t *Term) barrier(ctx context.Context, v view, pending map[clientv3.LeaseID]bool) error {
	var counted []clientv3.LeaseID
	for id, bare := range pending {
		switch {
		case v.leases[id]:
		case bare:
			if err := t.leaseEnd(ctx, id); err != nil {
				return err
			}
		default:
			counted = append(counted, id)
		}
	}
	left := len(counted)
	for _, id := range counted {
		if v.older+left < v.n {
			break
		}
		left--
		if err := t.leaseEnd(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// leaseEnd polls lease id until it is gone, and says so in the log.
func (t *Term) leaseEnd(ctx context.Context, id clientv3.LeaseID) error {
	// The term's queue key, gone or not, names whose lease it is.
	key := t.c.cfg.Layout.QueueKey(id)
	var logged time.Time
	for {
		ttl, err := t.leaseTTL(ctx, id)
		if err != nil {
			return t.waitErr(ctx, err)
		}
		if ttl == -1 {
			t.c.log.Trace("predecessor lease gone")
			return nil
		}
		// The TTL is truncated to whole seconds: at most one more.
		atMost := time.Duration(ttl+1) * time.Second
		switch {
		case logged.IsZero():
			if o := t.c.cfg.Observer; o != nil {
				o.BarrierWait()
			}
			t.c.log.Info("waiting for predecessor lease to end", "key", key, "lease", leaseHex(id), "at_most", atMost)
			logged = time.Now()
		case time.Since(logged) >= t.c.cfg.LeaseWaitLog:
			t.c.log.Info("still waiting for predecessor lease to end", "key", key, "lease", leaseHex(id), "at_most", atMost)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return t.waitErr(ctx)
		case <-time.After(leasePoll):
		}
	}
}

// renewUntil renews with attempts bounded by quietAfter, one
// after another, until one is answered or within has passed: an attempt
// sent to a frozen member, whose connection looks healthy, waits out its
// bound, and the next one goes to another member (renewals, "A quiet
// stream"). A handoff during a stalled member would otherwise wait the
// whole request timeout for a renewal that a member beside it answers at
// once.
func (t *Term) renewUntil(ctx context.Context, within time.Duration) error {
	end := time.Now().Add(within)
	for {
		err := t.renewOnce(ctx, quietAfter(t.TTL))
		if err == nil || errors.Is(err, ErrLeaseLost) || Permanent(err) || ctx.Err() != nil || time.Now().After(end) {
			return err
		}
	}
}

// waitErr turns the end of waiting into the error callers act on: a
// permanent error as it is; the term's loss by its cause; the caller's
// context ending as ErrNotLeader, or ErrUnreachable when etcd did not
// answer the last request.
func (t *Term) waitErr(ctx context.Context, errs ...error) error {
	if ctx.Err() == nil && len(errs) > 0 && errs[0] != nil {
		return errs[0]
	}
	if cause := context.Cause(t.ctx); cause != nil && cause != errRevoked {
		return cause
	}
	if err := t.c.answers.failing(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return fmt.Errorf("%w: %w", ErrNotLeader, ctx.Err())
}

// confirm is step 6 of docs/design.md, "One term, step by step": the fence
// point must still be ahead, renewing if it is close, so that the child
// does not start under a fence about to fire.
func (t *Term) confirm(ctx context.Context) error {
	if t.fence().Past(t.c.cfg.Now()) {
		if err := t.renewUntil(ctx, t.c.cfg.RequestTimeout); err != nil {
			return t.waitErr(ctx, err)
		}
		if t.fence().Past(t.c.cfg.Now()) {
			return fmt.Errorf("confirm: fence point already passed: %w", ErrLeaseLost)
		}
	}
	if ctx.Err() != nil {
		return t.waitErr(ctx)
	}
	return nil
}
