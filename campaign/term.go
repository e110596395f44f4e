package campaign

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/etcdwire"
	"github.com/etcdlead/etcdlead/internal/fence"
)

// Term is one lease with its queue key, its sentinel and its record: a
// candidacy that may become leadership.
type Term struct {
	c        *Campaigner
	Lease    clientv3.LeaseID
	Key      string        // the queue key
	Sentinel string        // the lease sentinel
	Record   string        // the term's record
	Rev      int64         // create revision of the three: the fencing token
	TTL      time.Duration // as granted by etcd
	dl       atomic.Int64  // boot-clock deadline, see Deadline
	sentAt   atomic.Int64  // boot-clock send time, see lastSent
	endOnce  sync.Once
	endDone  time.Time     // when End's transaction was answered
	endTook  time.Duration // and how long it took
	revoked  atomic.Bool
	fronted  atomic.Bool
	guards   sync.WaitGroup   // the guard's goroutines
	watches  clientv3.Watcher // the guard's watch stream, see guardWatch
	// ctx ends when the term is lost (its keys deleted or taken over, a
	// resign request, a refusal) or revoked; its cause says which.
	ctx  context.Context
	lose context.CancelCauseFunc

	// Slot is which of the election's N holders' slots the term took
	// (0...N-1), and SlotRev the slot key's create revision: the fencing
	// token of that slot, which grows from one holder of the slot to the
	// next. With one holder, Slot is 0 and SlotRev is Rev.
	Slot    int
	SlotRev int64

	// slotKey is the slot key the term holds, "" before it takes one.
	slotKey string

	// run is the lease of the term's record of Config.RunID, once made
	// (recordRun); 0 when none is held.
	run clientv3.LeaseID

	// rec is what the term's record holds, as it last wrote it.
	rec TermRecord
}

// withSlot is the term's record once it took slot i.
func (t *Term) withSlot(i int) TermRecord {
	r := t.rec
	r.Slot = &i
	return r
}

// lost ends the term for err.
func (t *Term) lost(err error) {
	t.c.notePause(err)
	t.lose(err)
}

// errRevoked ends a term's context when the term itself ends it.
var errRevoked = errors.New("term revoked")

// bound is a context that ends with ctx or with the term, whichever is
// first; its cause says why. The returned func ends it too.
func (t *Term) bound(ctx context.Context) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(t.ctx, func() { cancel(context.Cause(t.ctx)) })
	return ctx, func(cause error) {
		stop()
		cancel(cause)
	}
}

func (t *Term) reportFront() {
	if o := t.c.cfg.Observer; o != nil && !t.fronted.Swap(true) {
		o.Front(t.Key)
	}
}

// Deadline is the boot-clock time before which etcd cannot expire the lease:
// the send time of the last renewal etcd answered plus the TTL it granted.
func (t *Term) Deadline() time.Duration {
	return time.Duration(t.dl.Load())
}

// fence is the term's fence at its deadline now.
func (t *Term) fence() fence.Fence {
	return t.fenceAt(t.Deadline())
}

func (t *Term) fenceAt(d time.Duration) fence.Fence {
	return fence.Fence{Deadline: d, KillTimeout: t.c.cfg.Timing.KillTimeout, Margin: t.c.cfg.Timing.FenceMargin}
}

// setDeadline moves the deadline to d if d is later: answers that arrive
// out of turn never move it back.
func (t *Term) setDeadline(d time.Duration) { raise(&t.dl, int64(d)) }

// lastSent is the boot-clock send time of the newest request whose answer
// gave the lease time (the grant, or a renewal): the time from which the
// renewal cadence counts (firstRenewal). It is kept as it was read rather
// than worked back from the deadline, which adds to it the TTL that etcd
// answered, not necessarily the term's.
func (t *Term) lastSent() time.Duration { return time.Duration(t.sentAt.Load()) }

// raise sets a to v if v is greater: a value that only moves forward,
// whatever order concurrent writers come in.
func raise(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// renewOnce renews the lease with one attempt bounded by bound, over the
// client's renewal streams (see renewals); a stream counts as quiet after
// quietAfter.
//
// Why the deadline, send time + granted TTL on the boot clock, is never
// later than etcd's expiry (docs/design.md, "One term, step by step", step
// 8): the send time is read before the request is written, and etcd's
// leader renews the lease when the request reaches it, later, setting the
// expiry to its own now plus the lease's TTL, the TTL it answers. The send
// time used is that of the very request etcd answered, or of an older one
// (renewals, "Crediting answers"), never of a newer one. With clocks that
// advance at the same rate (the fence margin m absorbs the difference),
// send time + TTL is then at or before the expiry.
func (t *Term) renewOnce(ctx context.Context, bound time.Duration) error {
	o := t.c.cfg.Observer
	var start time.Duration
	if o != nil {
		start = t.c.cfg.Now()
	}
	done := t.c.answers.Begin()
	a, err := t.c.renewals.Renew(ctx, t.Lease, bound, quietAfter(t.TTL), t.c.cfg.Now)
	if err == nil && a.TTL <= 0 {
		err = rpctypes.ErrLeaseNotFound
	}
	done(ctx, err)
	if ctx.Err() != nil && context.Cause(ctx) == errFencePassed {
		err = errFencePassed
	}
	if o != nil && (ctx.Err() == nil || err == errFencePassed) {
		o.Renewed(t.c.cfg.Now()-start, err)
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("renewal: %w", ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("renewal: %w", err)
	}
	t.setDeadline(a.At + time.Duration(a.TTL)*time.Second)
	raise(&t.sentAt, int64(a.At))
	return nil
}

// renewWhileWaiting keeps a waiting candidate's lease alive every
// waiterRenewEvery, and after a failed attempt again after quietAfter, by
// when a quiet stream has been replaced (internal/etcdwire/renew.go). A
// lease that is gone ends the term: its keys went with it.
func (t *Term) renewWhileWaiting(ctx context.Context) {
	every := waiterRenewEvery(t.TTL)
	next := every
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
		next = every
		if err := t.renewOnce(ctx, every); err != nil {
			if errors.Is(err, ErrLeaseLost) || Permanent(err) {
				t.c.log.Warn("lease lost while waiting", "key", t.Key)
				t.lost(err)
				return
			}
			if ctx.Err() == nil {
				t.c.log.Warn("renewal failed", "error", err)
				next = quietAfter(t.TTL)
			}
		}
	}
}

// End ends the term in etcd (step 9): one transaction deletes its
// record, and its queue key, sentinel and slot key while they are on its
// lease, which wakes the next candidate. Callers end a term only once the
// child's processes are all gone: the record's delete says so to every
// successor. The lease stays until Revoke: a renewal after End is
// harmless, so a caller may end the term before it waits for Lead to
// return. A term whose delete etcd did not answer, within the request
// timeout, leaves its record to a successor, which takes it away once the
// lease is gone (clearEnded). It is safe to call more than once, and
// from several goroutines: each returns once the first call has.
func (t *Term) End() { t.endOnce.Do(t.endTerm) }

func (t *Term) endTerm() {
	t.lose(errRevoked)
	ctx, cancel := context.WithTimeout(context.Background(), t.c.cfg.RequestTimeout)
	defer cancel()
	t.c.log.Trace("ending term")
	sent := time.Now()
	if err := t.end(ctx); err != nil {
		t.c.log.Warn("could not delete the term's record; a successor will take it away once the lease is gone", "record", t.Record, "error", err)
	}
	t.endDone = time.Now()
	t.endTook = t.endDone.Sub(sent)
	t.c.log.Trace("term ended")
}

// maxRevokeWait bounds Revoke's wait after End: a successor farther from
// etcd than that pays one backend commit on its start read, and an End
// that a faulty member made slow does not delay the revoke as much again.
const maxRevokeWait = 100 * time.Millisecond

// Revoke ends the term (End, unless done), then revokes its lease, off
// the next candidate's way: no sooner than End took again after its
// answer (at most maxRevokeWait). etcd applies a revoke with a forced
// backend commit, which holds up every read that comes after it; a
// successor as far from etcd as this candidate has sent its start read by
// then, woken by End's delete. It returns once the term's guard has ended
// too, so that no goroutine of the term outlives it; the revoke and that
// wait are each bounded by the request timeout. It is safe to call more
// than once; only the first call waits.
func (t *Term) Revoke() {
	if t.revoked.Swap(true) {
		return
	}
	t.End()
	if d := time.Until(t.endDone.Add(min(t.endTook, maxRevokeWait))); d > 0 {
		time.Sleep(d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.c.cfg.RequestTimeout)
	defer cancel()
	t.c.log.Trace("revoking lease")
	err := t.revoke(ctx)
	t.c.log.Trace("revoke answered")
	// The guard's goroutines end with the term's context, ended above, and
	// its watches with their stream, closed after the revoke.
	guarded := make(chan struct{})
	go func() {
		if t.watches != nil {
			_ = t.watches.Close()
		}
		t.guards.Wait()
		close(guarded)
	}()
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.c.log.Warn("revoke failed; the lease will expire", "lease", leaseHex(t.Lease), "ttl", t.TTL, "error", err)
	} else {
		t.c.log.Info("lease revoked", "key", t.Key, "lease", leaseHex(t.Lease))
	}
	bound := time.NewTimer(t.c.cfg.RequestTimeout)
	defer bound.Stop()
	select {
	case <-guarded:
	case <-bound.C:
		t.c.log.Warn("the term's guard did not end in time", "key", t.Key)
	}
}

// end is the graceful end's transaction: the record goes only if this
// term created it (its create revision is the term's Rev, whatever a slot
// claim rewrote since), each other key only while it is on the term's
// lease (one put again by hand is not the term's to delete). A record the
// term did not create is another term's, under a lease ID that etcd gave
// out again: its child may still run. A term whose campaign transaction
// never showed its keys (Rev 0) leaves its record, if any, to a successor.
// It is sent again every quietAfter while unanswered, as a frozen member
// may hold it while the next candidate waits.
func (t *Term) end(ctx context.Context) error {
	onLease := func(key string) clientv3.Op {
		return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", t.Lease)},
			[]clientv3.Op{clientv3.OpDelete(key)}, nil)
	}
	ops := []clientv3.Op{onLease(t.Key), onLease(t.Sentinel)}
	if t.Rev != 0 {
		ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(t.Record), "=", t.Rev)},
			[]clientv3.Op{clientv3.OpDelete(t.Record)}, nil))
	}
	if t.slotKey != "" {
		ops = append(ops, onLease(t.slotKey))
	}
	_, err := etcdwire.Hedged(ctx, quietAfter(t.TTL), func(ctx context.Context) (struct{}, error) {
		_, err := t.c.cfg.Client.Txn(clientv3.WithRequireLeader(ctx)).Then(ops...).Commit()
		return struct{}{}, err
	})
	return err
}

// revoke revokes the lease, sending the request again every renewal
// interval while none is answered: the balancer may have sent it to a
// frozen member, whose connection looks healthy, while the next candidate
// waits for the lease to go. A revoke is idempotent, and the first answer
// counts; one that finds the lease gone already is a success.
func (t *Term) revoke(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan error)
	send := func() {
		go func() {
			_, err := t.c.cfg.Client.Revoke(clientv3.WithRequireLeader(ctx), t.Lease)
			select {
			case results <- err:
			case <-ctx.Done():
			}
		}()
	}
	again := time.NewTicker(quietAfter(t.TTL))
	defer again.Stop()
	send()
	var last error
	for {
		select {
		case err := <-results:
			if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) || Permanent(err) {
				return err
			}
			last = err
		case <-again.C:
			send()
		case <-ctx.Done():
			return cmp.Or(last, ctx.Err())
		}
	}
}

// retry runs f until it succeeds, ctx ends, or the error is permanent.
func retry(ctx context.Context, f func() error) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = 0
	return backoff.Retry(func() error {
		err := f()
		if err != nil && (Permanent(err) || ctx.Err() != nil) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(b, ctx))
}
