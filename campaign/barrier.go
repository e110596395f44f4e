package campaign

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/etcdwire"
)

// startReadPage is how many keys below its own a start read reads at first with one
// holder: enough for the nearest term and whether a second one waits,
// unless foreign keys are in the way, in which case the start read reads on past
// them. With N holders it reads N-1 more.
const startReadPage = 4

// olderTerm is a key of an older term as one read showed it.
type olderTerm struct {
	key   string
	rev   int64 // create revision
	mod   int64 // mod revision
	lease clientv3.LeaseID
	value []byte // a record's; nil for the keys read without values
}

func olderTermOf(kv *mvccpb.KeyValue, lease clientv3.LeaseID) *olderTerm {
	return &olderTerm{key: string(kv.Key), rev: kv.CreateRevision, mod: kv.ModRevision, lease: lease, value: kv.Value}
}

// view is what one read showed below this term's create revision, for an
// election of n holders.
type view struct {
	rev    int64        // the read's revision
	n      int          // holders
	qs     []*olderTerm // the n nearest valid queue keys below ours, nearest first
	ss     []*olderTerm // the n nearest valid sentinels below ours, nearest first
	rs     []*olderTerm // the valid records below ours that the read showed, nearest first
	queued int          // valid queue keys below ours (exact after enqueue, else counted up to n+1)
	terms  int          // valid sentinels below ours (likewise)
	// older is the number of terms, told apart by lease, that the valid
	// keys below ours belong to, and leases is their set; live are those
	// with a queue key or a sentinel. They are exact when older < n: a
	// page is read on past foreign keys until it holds n+1 valid ones or
	// ends.
	older  int
	leases map[clientv3.LeaseID]bool
	live   map[clientv3.LeaseID]bool
	// bare are the leases of the valid queue keys below ours whose
	// sentinel and record the read did not show: their term's were deleted
	// by hand, or it is an older etcdlead's. Its number of holders is then
	// unknown, so with n > 1 it is taken for a term of one, which no other
	// may run beside (docs/design.md, "More than one holder"). Exact when
	// older < n, as the leases are.
	bare map[clientv3.LeaseID]bool
	// floor is the create revision below which a page of queue keys or
	// sentinels was cut short (0: none was): a record below it may have
	// keys the read did not reach, so it is not taken for an ended term.
	floor int64
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
// left, ended ones counted until their records are gone, none of an
// unknown number of holders.
func (v view) clear() bool { return v.older < v.n && len(v.bare) == 0 }

// blocked reports that live terms, not only ended ones, keep this term
// from starting: what NoWait gives up on.
func (v view) blocked() bool { return len(v.live) >= v.n || len(v.bare) > 0 }

// isFront reports that this term is next: at most n terms are ahead.
func (v view) isFront() bool { return v.queued <= v.n && v.terms <= v.n }

// ended are the older terms the read showed by their record alone, whose
// queue key and sentinel are gone (endedTerm).
func (v view) ended() []endedTerm {
	var out []endedTerm
	for _, r := range v.rs {
		if !v.live[r.lease] && r.rev >= v.floor {
			rec, ok := ParseRecord(r.value)
			out = append(out, endedTerm{lease: r.lease, key: r.key, mod: r.mod, rec: rec, known: ok})
		}
	}
	return out
}

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
	if s := nearestOf(v.ss); s != nil {
		return fmt.Sprintf("an earlier term's lease %s is still alive", leaseHex(s.lease))
	}
	return fmt.Sprintf("an earlier term's record %s is still there", v.rs[0].key)
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
func (v *view) scan(l Layout, queue, sentinels, records []*mvccpb.KeyValue) {
	v.leases, v.live = map[clientv3.LeaseID]bool{}, map[clientv3.LeaseID]bool{}
	v.ss, v.terms = v.nearest(l.ValidSentinel, sentinels)
	v.rs = nil
	for _, kv := range records {
		if id, ok := l.RecordLease(kv); ok {
			v.rs = append(v.rs, olderTermOf(kv, id))
		}
	}
	slices.SortFunc(v.rs, func(a, b *olderTerm) int { return cmp.Compare(b.rev, a.rev) })
	v.bare = nil
	for _, kv := range queue {
		id := clientv3.LeaseID(kv.Lease)
		if l.ValidQueueKey(kv) && !v.live[id] && !slices.ContainsFunc(v.rs, func(r *olderTerm) bool { return r.lease == id }) {
			if v.bare == nil {
				v.bare = map[clientv3.LeaseID]bool{}
			}
			v.bare[id] = true
		}
	}
	v.qs, v.queued = v.nearest(l.ValidQueueKey, queue)
	for _, r := range v.rs {
		v.leases[r.lease] = true
	}
	v.older = len(v.leases)
}

// nearest returns the n nearest valid keys of kvs and how many are valid,
// and adds their leases to the view's sets.
func (v *view) nearest(valid func(*mvccpb.KeyValue) bool, kvs []*mvccpb.KeyValue) ([]*olderTerm, int) {
	var ts []*olderTerm
	count := 0
	for _, kv := range kvs {
		if !valid(kv) {
			continue
		}
		count++
		id := clientv3.LeaseID(kv.Lease)
		v.leases[id], v.live[id] = true, true
		ts = append(ts, olderTermOf(kv, id))
	}
	slices.SortFunc(ts, func(a, b *olderTerm) int { return cmp.Compare(b.rev, a.rev) })
	return ts[:min(len(ts), v.n)], count
}

// watched is what a waiter watches: the sentinels of the n nearest live
// terms, and the queue key of each of them whose sentinel the read did
// not show (it is gone, or the term is an older etcdlead's). A term's own
// end deletes its record, queue key and sentinel in one revision, and its
// lease's end the last two, so the sentinel tells of both. The n nearest
// older terms change only when one of them goes, so a term that goes
// further ahead wakes nobody it need not: a handoff wakes at most n
// waiters.
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
// transaction creates the queue key, the sentinel and the record, each
// only if absent, and reads the three prefixes whole. Reads after a write
// in one transaction see it, so the answer holds this term's create
// revision and every older term, atomically.
func (t *Term) enqueue(ctx context.Context) (view, error) {
	l := t.c.cfg.Layout
	sorted := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)}
	// The resign key is read only to learn at once, before any child, that
	// the role may not read it: the term watches it from now on. The pause
	// is read to refuse a start while it lasts; a pause put later, the
	// guard hears.
	// The sentinels are read with their values, which say how many holders
	// each term was started with, and the records with theirs, which an
	// ended term's clearing needs.
	reads := []clientv3.Op{clientv3.OpGet(l.QueuePrefix(), append(sorted, clientv3.WithKeysOnly())...), clientv3.OpGet(l.SentinelPrefix(), sorted...),
		clientv3.OpGet(l.RecordPrefix(), sorted...),
		clientv3.OpGet(l.ResignKey(), clientv3.WithKeysOnly()), clientv3.OpGet(l.PauseKey(), clientv3.WithKeysOnly())}
	reads = append(reads, t.c.readRun()...)
	resp, err := t.create(ctx, reads)
	if err != nil {
		return view{}, fmt.Errorf("campaign transaction: %w", err)
	}
	t.c.renewals.SeeHeader(resp.Header)
	rs := resp.Responses[len(resp.Responses)-len(reads):]
	queue, sentinels, records := rs[0].GetResponseRange().Kvs, rs[1].GetResponseRange().Kvs, rs[2].GetResponseRange().Kvs
	k, s, r := ownKey(queue, t.Key, t.Lease), ownKey(sentinels, t.Sentinel, t.Lease), ownKey(records, t.Record, 0)
	if k == nil || s == nil || r == nil || k.CreateRevision != s.CreateRevision || k.CreateRevision != r.CreateRevision {
		return view{}, fmt.Errorf("campaign transaction: %w", ErrKeyDeleted)
	}
	t.Rev = k.CreateRevision
	if p := rs[4].GetResponseRange().Kvs; len(p) > 0 {
		return view{}, paused(p[0].ModRevision)
	}
	if len(rs) > 5 {
		if err := t.c.checkRun(rs[5].GetResponseRange().Kvs); err != nil {
			return view{}, err
		}
	}
	if err := t.agree(queue, sentinels, records); err != nil {
		return view{}, err
	}
	v := view{rev: resp.Header.Revision, n: t.c.holders()}
	v.scan(l, below(queue, t.Rev), below(sentinels, t.Rev), below(records, t.Rev))
	return v, nil
}

// create is enqueue's transaction: the three keys, each only if absent,
// then reads.
func (t *Term) create(ctx context.Context, reads []clientv3.Op) (resp *clientv3.TxnResponse, err error) {
	err = t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) (err error) {
		resp, err = t.c.cfg.Client.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(t.Key), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(t.Sentinel), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(t.Record), "=", 0)).
			Then(append([]clientv3.Op{clientv3.OpPut(t.Key, t.c.cfg.ID, clientv3.WithLease(t.Lease)),
				clientv3.OpPut(t.Sentinel, SentinelValue(t.Key, t.c.holders(), -1), clientv3.WithLease(t.Lease)),
				clientv3.OpPut(t.Record, t.rec.value())}, reads...)...).
			// Else: an earlier attempt of this very transaction committed
			// but its answer was lost; the keys are ours all the same.
			Else(reads...).
			Commit()
		return err
	})
	return resp, err
}

// ownKey is key among kvs, if it is on lease.
func ownKey(kvs []*mvccpb.KeyValue, key string, lease clientv3.LeaseID) *mvccpb.KeyValue {
	for _, kv := range kvs {
		if string(kv.Key) == key && clientv3.LeaseID(kv.Lease) == lease {
			return kv
		}
	}
	return nil
}

// agree checks that every other live term in the election was started
// with as many holders as this one (docs/design.md, "More than one
// holder"). Of two terms that disagree and live at once, the newer one
// sees the older one's sentinel here, or its record if its sentinel was
// deleted by hand, and refuses, before it can count the older terms by a
// rule the older ones do not follow. The record of a term whose lease
// ended is not asked: after every candidate was stopped to change the
// number, a record left by one killed would refuse every new candidate.
func (t *Term) agree(queue, sentinels, records []*mvccpb.KeyValue) error {
	l := t.c.cfg.Layout
	live := map[clientv3.LeaseID]bool{}
	refuse := func(found int, key string) error {
		return &HoldersError{Election: l.Prefix(), Want: t.c.holders(), Found: found, Sentinel: key}
	}
	for _, kv := range sentinels {
		if !l.ValidSentinel(kv) || string(kv.Key) == t.Sentinel {
			continue
		}
		live[clientv3.LeaseID(kv.Lease)] = true
		if h := HoldersOf(kv.Value); h != t.c.holders() {
			return refuse(h, string(kv.Key))
		}
	}
	for _, kv := range queue {
		if l.ValidQueueKey(kv) {
			live[clientv3.LeaseID(kv.Lease)] = true
		}
	}
	for _, kv := range records {
		id, ok := l.RecordLease(kv)
		if !ok || id == t.Lease || !live[id] {
			continue
		}
		rec, ok := ParseRecord(kv.Value)
		if h := max(1, rec.Holders); ok && h != t.c.holders() {
			return refuse(h, string(kv.Key))
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

// wait is step 4: clear the ended terms the last read showed, or
// watch the nearest live older term (with N holders, the N nearest), and
// after either read again. It returns once a read shows nothing older:
// no queue key, sentinel or record below this term's (with N holders,
// fewer than N older terms, none of an unknown number of holders).
func (t *Term) wait(ctx context.Context, v view) error {
	var logged view
	for !v.clear() {
		if ended := v.ended(); len(ended) > 0 {
			if err := t.clearAll(ctx, ended); err != nil {
				return t.waitErr(ctx, err)
			}
		} else {
			if v.isFront() {
				t.reportFront()
			}
			t.logWait(ctx, v, &logged)
			if err := t.waitEvent(ctx, v); err != nil {
				return t.waitErr(ctx)
			}
		}
		next, err := t.startRead(ctx)
		t.c.log.Trace("start read answered")
		if err != nil {
			return t.waitErr(ctx, err)
		}
		v = next
	}
	return nil
}

// clearAll clears ended terms at once (clearer.clearEnded): a sweep ends
// every lease its raft leader knew, and each hold counts from its own
// answer.
func (t *Term) clearAll(ctx context.Context, ended []endedTerm) error {
	errs := make(chan error, len(ended))
	for _, e := range ended {
		go func() { errs <- t.c.clearer.clearEnded(ctx, e) }()
	}
	var first error
	for range ended {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
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

// waitEvent watches the nearest older sentinel and, when it belongs to
// another term or is missing, the nearest older queue key, from just after
// the read; with N holders, those of the N nearest terms (view.watched).
// It returns once one of them moved (olderTerm.moved) or a watch broke
// (compaction, a lost etcd leader): either way the caller reads again,
// and the read decides. A read whose older terms are beyond its pages
// only, with nothing to watch, is read again after recordPoll.
func (t *Term) waitEvent(ctx context.Context, v view) error {
	ts := v.watched()
	if len(ts) == 0 {
		if !sleep(ctx, recordPoll) {
			return ctx.Err()
		}
		return nil
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	var keys []string
	for _, p := range ts {
		keys = append(keys, p.key)
	}
	ws, stop := t.watchAll(wctx, keys, v.rev)
	defer stop()
	var progress <-chan time.Time
	keyless := v.keylessSentinels()
	if len(keyless) > 0 {
		tick := time.NewTicker(t.c.cfg.LeaseWaitLog)
		defer tick.Stop()
		progress = tick.C
	}
	for {
		var w etcdwire.Watched
		select {
		case w = <-ws:
		case <-progress:
			for _, s := range keyless {
				t.logLeaseLeft(ctx, s.lease)
			}
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		if !w.OK {
			return nil
		}
		if err := w.Resp.Err(); err != nil {
			t.c.log.Debug("predecessor watch interrupted; looking again", "error", err)
			return nil
		}
		if slices.ContainsFunc(w.Resp.Events, ts[w.I].moved) {
			t.c.log.Debug("predecessor moved; looking again", "key", keys[w.I])
			return nil
		}
	}
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

// startRead is the start read (step 5): one read-only transaction that
// checks this term's own keys (create revision, and lease for the two on
// it), reads the nearest valid queue key, sentinel and records below them
// (with N holders, the N nearest and whether one more is there), the
// pause and the run's records, retrying until ctx ends, and sent again
// every r while unanswered (hedged). It returns an error wrapping
// ErrKeyDeleted when the own keys are not intact, ErrPaused when the
// election is paused, or ErrRunDone when every slot ran the run id.
func (t *Term) startRead(ctx context.Context) (view, error) {
	var r startReading
	err := retry(ctx, func() (err error) {
		r, err = etcdwire.Hedged(ctx, quietAfter(t.TTL), t.readStart)
		return err
	})
	v := r.v
	switch {
	case err != nil:
	case !r.mine:
		err = fmt.Errorf("while waiting: %w", ErrKeyDeleted)
	case r.pause > 0:
		err = paused(r.pause)
	case r.done != nil:
		err = r.done
	}
	return v, err
}

// startReading is what one start read found.
type startReading struct {
	v     view
	mine  bool
	pause int64 // the pause's revision, if the read found one
	done  error // the run id is recorded (ErrRunDone)
}

// readStart is one start read (startRead), in one transaction and the
// pages that follow it.
func (t *Term) readStart(ctx context.Context) (startReading, error) {
	l := t.c.cfg.Layout
	older := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMaxCreateRev(t.Rev - 1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)}
	keysOnly := append(slices.Clip(older), clientv3.WithKeysOnly())
	n := t.c.holders()
	var x startReading
	err := t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) error {
		limit := clientv3.WithLimit(int64(startReadPage + n - 1))
		resp, err := t.c.cfg.Client.Txn(rctx).
			If(t.intact()...).
			Then(append([]clientv3.Op{clientv3.OpGet(l.QueuePrefix(), append(slices.Clip(keysOnly), limit)...),
				clientv3.OpGet(l.SentinelPrefix(), append(slices.Clip(keysOnly), limit)...),
				clientv3.OpGet(l.RecordPrefix(), append(slices.Clip(older), limit)...),
				clientv3.OpGet(l.PauseKey(), clientv3.WithKeysOnly())}, t.c.readRun()...)...).
			Commit()
		if err != nil {
			return err
		}
		t.c.renewals.SeeHeader(resp.Header)
		x = startReading{v: view{rev: resp.Header.Revision, n: n}, mine: resp.Succeeded}
		if !x.mine {
			return nil
		}
		if p := resp.Responses[3].GetResponseRange().Kvs; len(p) > 0 {
			x.pause = p[0].ModRevision
			return nil
		}
		if len(resp.Responses) > 4 {
			if x.done = t.c.checkRun(resp.Responses[4].GetResponseRange().Kvs); x.done != nil {
				return nil
			}
		}
		pages := []*pb.RangeResponse{resp.Responses[0].GetResponseRange(), resp.Responses[1].GetResponseRange(), resp.Responses[2].GetResponseRange()}
		return t.readOn(rctx, &x.v, pages, keysOnly, older)
	})
	return x, err
}

// readOn fills v from the start read's pages of queue keys, sentinels and
// records. A page that foreign keys filled before it held n+1 valid keys
// is read on, at the read's revision, so that none can hide a valid key;
// one cut short after n+1 valid keys sets the view's floor.
func (t *Term) readOn(ctx context.Context, v *view, pages []*pb.RangeResponse, keysOnly, older []clientv3.OpOption) error {
	l := t.c.cfg.Layout
	prefixes := []string{l.QueuePrefix(), l.SentinelPrefix(), l.RecordPrefix()}
	valid := []func(*mvccpb.KeyValue) bool{l.ValidQueueKey, l.ValidSentinel, l.ValidRecord}
	for i, p := range pages {
		if !p.More {
			continue
		}
		if countFunc(p.Kvs, valid[i]) >= v.n+1 {
			if i < 2 && len(p.Kvs) > 0 {
				v.floor = max(v.floor, p.Kvs[len(p.Kvs)-1].CreateRevision)
			}
			continue
		}
		opts := keysOnly
		if i == 2 {
			opts = older
		}
		kvs, err := t.readAt(ctx, prefixes[i], v.rev, opts)
		if err != nil {
			return err
		}
		p.Kvs = kvs
	}
	v.scan(l, pages[0].Kvs, pages[1].Kvs, pages[2].Kvs)
	return nil
}

func countFunc[T any](s []T, f func(T) bool) int {
	n := 0
	for _, x := range s {
		if f(x) {
			n++
		}
	}
	return n
}

func (t *Term) readAt(ctx context.Context, prefix string, rev int64, opts []clientv3.OpOption) ([]*mvccpb.KeyValue, error) {
	resp, err := t.c.cfg.Client.Get(ctx, prefix, append(slices.Clip(opts), clientv3.WithRev(rev))...)
	if err != nil {
		return nil, err
	}
	return resp.Kvs, nil
}

// intact compares this term's keys with what it created: same create
// revision, and the queue key and sentinel on the term's lease.
func (t *Term) intact() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(t.Key), "=", t.Rev),
		clientv3.Compare(clientv3.LeaseValue(t.Key), "=", t.Lease),
		clientv3.Compare(clientv3.CreateRevision(t.Sentinel), "=", t.Rev),
		clientv3.Compare(clientv3.LeaseValue(t.Sentinel), "=", t.Lease),
		clientv3.Compare(clientv3.CreateRevision(t.Record), "=", t.Rev),
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
	if err := t.c.answers.Failing(); err != nil {
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
