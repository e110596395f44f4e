package campaign

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/etcdwire"
)

// Config describes one candidate. Client, Layout, ID, Timing.TTL and Now
// are required.
type Config struct {
	Client *clientv3.Client
	Layout Layout
	ID     string
	// Timing is the term's T, K, m and r. K and m are the fence's
	// (internal/fence): the confirmation refuses to start a term whose
	// fence point has passed, and Lead tells the keeper of a deadline
	// before the fence point of the last one it told comes close. A
	// RenewInterval of 0 means DefaultRenewInterval(TTL); how soon a
	// request counts as quiet does not follow it.
	Timing Timing
	// RequestTimeout bounds each request that has no cadence of its own.
	RequestTimeout time.Duration
	// Now is a clock that keeps counting while the machine is suspended
	// (CLOCK_BOOTTIME); deadlines are points on it.
	Now    func() time.Duration
	Logger hclog.Logger
	// Holders is how many terms of the election may hold at once, each
	// with its child (docs/design.md, "More than one holder"); 0 means 1.
	// Every candidate of an election must be given the same number.
	Holders int
	// Containment, if not "", is recorded in each term's record, one word
	// that says what holds its child's processes together, for status to
	// show; the campaign does nothing else with it.
	Containment string
	// RunID, if not "", names the firing this candidate runs (--run-id):
	// a term records it before its child starts and refuses with
	// ErrRunDone once it is recorded (run.go). The record lasts RunTTL,
	// whole seconds and at least TTL.
	RunID  string
	RunTTL time.Duration
	// NoWait makes Campaign give up with ErrNotLeader, instead of queueing,
	// when another term is ahead (with Holders N, when N are).
	NoWait bool
	// Observer, when set, hears about renewals and barrier waits (metrics).
	Observer Observer
	// LeaseWaitLog is how often a wait for an older lease logs how long it
	// may still last; 0 means every 5s. Such a wait can take up to a TTL
	// with nothing else to log.
	LeaseWaitLog time.Duration
}

// Observer receives events for metrics and health reports. Its methods are
// called from the campaign's goroutines and must not block.
type Observer interface {
	// Renewed reports one renewal attempt, leader's or waiter's.
	Renewed(latency time.Duration, err error)
	// BarrierWait reports that an older term's lease outlived its queue key.
	BarrierWait()
	// Queued reports that this candidate's key is in etcd (connected and
	// campaigning) with ahead older terms before it.
	Queued(key string, ahead int)
	// Paused reports that a read found the election paused: etcd
	// answered, and the candidate waits for the resume.
	Paused()
	// Front reports, once per term, that at most one term is ahead (with
	// Holders N, at most N): this one is next, so work that a start needs
	// can begin.
	Front(key string)
}

// Campaigner runs terms for one candidate. It is safe to use from one
// goroutine at a time.
type Campaigner struct {
	cfg      Config
	log      hclog.Logger
	answers  etcdwire.Reachability
	renewals *etcdwire.Renewals // shared by every Campaigner on cfg.Client
	clearer  clearer
	// paused is set when a term ended on the election's pause: the next
	// campaign waits for the resume first (awaitResume).
	paused atomic.Bool
}

// New checks cfg and returns a Campaigner.
func New(cfg Config) (*Campaigner, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("campaign: no etcd client")
	case cfg.Layout.p == "":
		return nil, errors.New("campaign: no key layout")
	case cfg.Timing.TTL < MinTTL || cfg.Timing.TTL%time.Second != 0:
		return nil, fmt.Errorf("campaign: ttl %s must be whole seconds, at least %s", cfg.Timing.TTL, MinTTL)
	case cfg.Now == nil:
		return nil, errors.New("campaign: no clock")
	case cfg.Timing.RenewInterval != 0 && cfg.Timing.RenewInterval < MinRenewInterval:
		return nil, fmt.Errorf("campaign: renew interval %s must be 0 (the default) or at least %s", cfg.Timing.RenewInterval, MinRenewInterval)
	case cfg.Holders < 0 || cfg.Holders > MaxHolders:
		return nil, fmt.Errorf("campaign: holders %d must be between 1 and %d", cfg.Holders, MaxHolders)
	}
	if err := CheckID(cfg.ID); err != nil {
		return nil, err
	}
	if cfg.RunID != "" {
		if err := CheckRunID(cfg.RunID); err != nil {
			return nil, err
		}
		if cfg.RunTTL < cfg.Timing.TTL || cfg.RunTTL%time.Second != 0 {
			return nil, fmt.Errorf("campaign: run ttl %s must be whole seconds, at least the ttl %s", cfg.RunTTL, cfg.Timing.TTL)
		}
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.LeaseWaitLog <= 0 {
		cfg.LeaseWaitLog = 5 * time.Second
	}
	c := &Campaigner{cfg: cfg, log: cfg.Logger, renewals: etcdwire.RenewalsOf(cfg.Client)}
	c.clearer = clearer{
		cli: cfg.Client,
		req: func(ctx context.Context, f func(context.Context) error) error {
			_, err := etcdwire.Hedged(ctx, quietAfter(cfg.Timing.TTL), func(ctx context.Context) (struct{}, error) {
				return struct{}{}, c.request(ctx, cfg.RequestTimeout, f)
			})
			return err
		},
		now: cfg.Now, log: cfg.Logger,
		margin: cfg.Timing.FenceMargin, ttl: cfg.Timing.TTL,
		see: c.renewals.SeeHeader, known: c.knownTerm,
		waiting: func() {
			if o := cfg.Observer; o != nil {
				o.BarrierWait()
			}
		},
		logEvery: cfg.LeaseWaitLog,
	}
	return c, nil
}

// MaxHolders bounds Config.Holders: a waiter watches up to two keys of each
// of the N terms nearest ahead of it.
const MaxHolders = 100

// holders is Config.Holders, 1 when unset.
func (c *Campaigner) holders() int { return max(1, c.cfg.Holders) }

// renewEvery is the leader's renewal cadence r.
func (c *Campaigner) renewEvery() time.Duration {
	return c.cfg.Timing.renew()
}

// Campaign runs one term up to leadership (docs/design.md, "One term"). It
// blocks until a read taken after the last wake-up shows this term's own
// keys intact and no valid queue key, sentinel or record of another term
// below its own (with Holders N: fewer than N older terms, those that
// ended counted until their records are gone), and, with N > 1, it holds
// a slot; or until ctx ends, the term is lost, or a step fails. On any
// error the term ends as Revoke ends it, so a failed campaign leaves
// nothing behind in etcd. A context that ends while another term is ahead
// gives an error wrapping ErrNotLeader, or ErrUnreachable when etcd did
// not answer the last request.
func (c *Campaigner) Campaign(ctx context.Context) (_ *Term, err error) {
	if err := c.awaitResume(ctx); err != nil {
		return nil, err
	}
	t, err := c.grant(ctx)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.notePause(err)
			t.ForgetRun() // its child never started
			t.Revoke()
		}
	}()
	c.log.Info("campaigning", "key", t.Key, "lease", leaseHex(t.Lease), "ttl", t.TTL)
	v, err := t.enqueue(ctx)
	if err != nil {
		return nil, err
	}
	c.log.Trace("enqueued")
	if o := c.cfg.Observer; o != nil {
		o.Queued(t.Key, max(v.queued, v.terms))
	}
	// An ended term ahead is no candidate: it is waited out, not given up on.
	if c.cfg.NoWait && v.blocked() {
		return nil, fmt.Errorf("%w: %s", ErrNotLeader, v.ahead())
	}
	if err := t.pass(ctx, v); err != nil {
		return nil, err
	}
	ok = true
	if c.holders() > 1 {
		c.log.Info("elected", "key", t.Key, "rev", t.Rev, "slot", t.Slot, "slot_rev", t.SlotRev, "holders", c.holders())
	} else {
		c.log.Info("elected", "key", t.Key, "rev", t.Rev)
	}
	return t, nil
}

// pass takes an enqueued term through steps 3 to 7: its guard, the wait
// behind the terms ahead (v), a slot with N holders, the run id, and the
// confirmation.
func (t *Term) pass(ctx context.Context, v view) error {
	t.guard(t.Rev)
	// The wait ends with the term: a deleted own key, a resign request.
	// The renewals while waiting end with the wait, before Campaign returns
	// (and before the revoke of a failed campaign): none may come after.
	wctx, cancel := t.bound(ctx)
	var renewing sync.WaitGroup
	defer func() {
		cancel(nil)
		renewing.Wait()
	}()
	// The lease is kept while the term waits, clears ended terms or takes
	// a slot.
	renewing.Go(func() { t.renewWhileWaiting(wctx) })
	if !v.clear() {
		if err := t.wait(wctx, v); err != nil {
			return err
		}
	}
	t.SlotRev = t.Rev
	if t.c.holders() > 1 {
		if err := t.takeSlot(wctx); err != nil {
			return err
		}
	}
	if err := t.recordRun(wctx); err != nil {
		return err
	}
	return t.confirm(wctx)
}

// sleep waits for d, or until ctx ends (false). It waits on the monotonic
// clock, which stops in a suspend while the boot clock does not: for a
// wait until a boot-clock time, a suspend can only lengthen it.
func sleep(ctx context.Context, d time.Duration) bool {
	wait := time.NewTimer(d)
	defer wait.Stop()
	select {
	case <-wait.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// notePause remembers a term that ended on the election's pause.
func (c *Campaigner) notePause(err error) {
	if errors.Is(err, ErrPaused) {
		c.paused.Store(true)
	}
}

// grant is step 1 of docs/design.md, "One term, step by step": a fresh lease
// for this term only.
func (c *Campaigner) grant(ctx context.Context) (*Term, error) {
	if err := c.learnTerm(ctx); err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	known := c.knownTerm()
	sent := c.cfg.Now()
	var resp *clientv3.LeaseGrantResponse
	err := c.request(ctx, c.cfg.RequestTimeout, func(rctx context.Context) (err error) {
		resp, err = c.cfg.Client.Grant(rctx, int64(c.cfg.Timing.TTL/time.Second))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	c.renewals.SeeHeader(resp.ResponseHeader)
	l := c.cfg.Layout
	t := &Term{
		c:        c,
		Lease:    resp.ID,
		Key:      l.QueueKey(resp.ID),
		Sentinel: l.SentinelKey(resp.ID),
		Record:   l.RecordKey(resp.ID),
		TTL:      time.Duration(resp.TTL) * time.Second,
	}
	t.rec = TermRecord{Key: t.Key, TTL: resp.TTL, RaftTerm: known, Containment: c.cfg.Containment}
	if c.holders() > 1 {
		t.rec.Holders = c.holders()
	}
	t.ctx, t.lose = context.WithCancelCause(context.Background())
	t.dl.Store(int64(sent + t.TTL))
	t.sentAt.Store(int64(sent))
	return t, nil
}

// request runs one unary request bounded by timeout, and remembers whether
// etcd answered it (see reach).
func (c *Campaigner) request(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), timeout)
	defer cancel()
	done := c.answers.Begin()
	err := f(rctx)
	done(ctx, err)
	return err
}
