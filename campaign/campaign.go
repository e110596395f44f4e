package campaign

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config describes one candidate. Client, Prefix, ID, TTL and Now are
// required.
type Config struct {
	Client *clientv3.Client
	// Prefix is the election prefix P; keys are P/<lease id in hex>.
	Prefix string
	ID     string
	TTL    time.Duration
	// Guard is K + m: the confirmation refuses to start a term whose fence
	// would fire at once.
	Guard time.Duration
	// RequestTimeout bounds each request that has no cadence of its own.
	RequestTimeout time.Duration
	// Now is a clock that keeps counting while the machine is suspended
	// (CLOCK_BOOTTIME); deadlines are points on it.
	Now    func() time.Duration
	Logger hclog.Logger
	// NoWait makes Campaign give up with ErrNotLeader, instead of queueing,
	// when another candidate is ahead.
	NoWait bool
	// ResignKey, when set, is watched while leading: a put whose value is
	// this term's key asks the leader to step down (Hold returns ErrResigned).
	ResignKey string
	// Observer, when set, hears about renewals and barrier waits (metrics).
	Observer Observer
}

// Observer receives events for metrics and health reports. Its methods are
// called from the campaign's goroutines and must not block.
type Observer interface {
	// Renewed reports one renewal attempt, leader's or waiter's.
	Renewed(latency time.Duration, err error)
	// BarrierWait reports that a predecessor's lease outlived its key.
	BarrierWait()
	// Queued reports that this candidate's key is in etcd (connected and
	// campaigning) with ahead candidates before it.
	Queued(key string, ahead int)
	// Front reports, once per term, that at most one candidate is ahead:
	// this one is next, so work that a start needs can begin.
	Front(key string)
}

// Campaigner runs terms for one candidate. It is safe to use from one
// goroutine at a time.
type Campaigner struct {
	cfg Config
	log hclog.Logger
}

// New checks cfg and returns a Campaigner.
func New(cfg Config) (*Campaigner, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("campaign: no etcd client")
	case cfg.Prefix == "" || strings.HasSuffix(cfg.Prefix, "/"):
		return nil, fmt.Errorf("campaign: prefix %q must be non-empty without a trailing slash", cfg.Prefix)
	case cfg.ID == "":
		return nil, errors.New("campaign: empty id")
	case cfg.TTL < MinTTL || cfg.TTL%time.Second != 0:
		return nil, fmt.Errorf("campaign: ttl %s must be whole seconds, at least %s", cfg.TTL, MinTTL)
	case cfg.Now == nil:
		return nil, errors.New("campaign: no clock")
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Campaigner{cfg: cfg, log: cfg.Logger}, nil
}

// Campaign runs one term up to leadership (DESIGN.md steps 1-5). It blocks
// until this candidate leads and every predecessor's lease is gone, or until
// ctx ends or a step fails. On any error the term's lease is revoked, so a
// failed campaign leaves nothing behind in etcd; a context that ends while
// another candidate leads gives an error that wraps ErrNotLeader.
func (c *Campaigner) Campaign(ctx context.Context) (*Term, error) {
	t, err := c.grant(ctx)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			t.Revoke()
		}
	}()
	c.log.Info("campaigning", "key", t.Key, "lease", fmt.Sprintf("%x", int64(t.Lease)), "ttl", t.TTL)
	preds, rev, err := t.enqueue(ctx)
	if err != nil {
		return nil, err
	}
	if o := c.cfg.Observer; o != nil {
		o.Queued(t.Key, len(preds))
	}
	if c.cfg.NoWait && len(preds) > 0 {
		return nil, fmt.Errorf("%w: %s is ahead", ErrNotLeader, preds[0].key)
	}
	if len(preds) <= 1 {
		t.front()
	}
	if len(preds) == 0 {
		// Nobody was ahead, so there is nothing to wait for or to vouch
		// for (no key can be created before the first one): the
		// transaction that created the key confirms it, and saves a commit.
		t.watchRev = rev
	} else {
		if err := t.wait(ctx, preds, rev); err != nil {
			return nil, err
		}
		if err := t.confirm(ctx); err != nil {
			return nil, err
		}
	}
	ok = true
	c.log.Info("elected", "key", t.Key, "rev", t.Rev)
	return t, nil
}

// grant is step 1: a fresh lease for this term only.
func (c *Campaigner) grant(ctx context.Context) (*Term, error) {
	rctx, cancel := c.requestCtx(ctx)
	defer cancel()
	sent := c.cfg.Now()
	resp, err := c.cfg.Client.Grant(rctx, int64(c.cfg.TTL/time.Second))
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	ttl := time.Duration(resp.TTL) * time.Second
	t := &Term{
		c:     c,
		Lease: resp.ID,
		Key:   fmt.Sprintf("%s/%x", c.cfg.Prefix, int64(resp.ID)),
		TTL:   ttl,
	}
	t.dl.Store(int64(sent + ttl))
	return t, nil
}

func (c *Campaigner) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(clientv3.WithRequireLeader(ctx), c.cfg.RequestTimeout)
}
