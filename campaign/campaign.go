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
	if err := t.wait(ctx, preds, rev); err != nil {
		return nil, err
	}
	if err := t.confirm(ctx); err != nil {
		return nil, err
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
