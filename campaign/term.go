package campaign

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Term is one lease and one key: a candidacy that became leadership.
type Term struct {
	c        *Campaigner
	Lease    clientv3.LeaseID
	Key      string
	Rev      int64         // create revision of Key: the fencing token
	TTL      time.Duration // as granted by etcd
	watchRev int64
	dl       atomic.Int64 // boot-clock deadline, see Deadline
	revoked  atomic.Bool
	fronted  bool
	vouch    bool // Hold re-puts the key (see putVouch)
}

func (t *Term) front() {
	if o := t.c.cfg.Observer; o != nil && !t.fronted {
		t.fronted = true
		o.Front(t.Key)
	}
}

// Deadline is the boot-clock time before which etcd cannot expire the lease:
// the send time of the last successful renewal plus the granted TTL.
func (t *Term) Deadline() time.Duration {
	return time.Duration(t.dl.Load())
}

func (t *Term) setDeadline(d time.Duration) {
	for {
		old := t.dl.Load()
		if int64(d) <= old || t.dl.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// renewOnce renews the lease with one bounded attempt. The deadline counts
// from the send time: etcd extends from when it receives the renewal, so this
// is never later than etcd's own expiry.
func (t *Term) renewOnce(ctx context.Context, timeout time.Duration) error {
	rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), timeout)
	defer cancel()
	sent := t.c.cfg.Now()
	resp, err := t.c.cfg.Client.KeepAliveOnce(rctx, t.Lease)
	if o := t.c.cfg.Observer; o != nil && ctx.Err() == nil {
		o.Renewed(t.c.cfg.Now()-sent, err)
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("renewal: %w", ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("renewal: %w", err)
	}
	t.setDeadline(sent + time.Duration(resp.TTL)*time.Second)
	return nil
}

// renewWhileWaiting keeps a waiting candidate's lease alive every T/3. A lease
// that is gone ends the wait: its key went with it.
func (t *Term) renewWhileWaiting(ctx context.Context, fail context.CancelCauseFunc) {
	every := t.TTL / 3
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		if err := t.renewOnce(ctx, every); err != nil {
			if errors.Is(err, ErrLeaseLost) || Permanent(err) {
				t.c.log.Warn("lease lost while waiting", "key", t.Key)
				fail(err)
				return
			}
			if ctx.Err() == nil {
				t.c.log.Warn("renewal failed", "error", err)
			}
		}
	}
}

// Revoke ends the term: etcd deletes the key with the lease, which wakes the
// next candidate. Callers revoke only once the child's group is gone. It is
// bounded by the request timeout and safe to call more than once.
func (t *Term) Revoke() {
	if t.revoked.Swap(true) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.c.cfg.RequestTimeout)
	defer cancel()
	if _, err := t.c.cfg.Client.Revoke(ctx, t.Lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.c.log.Warn("revoke failed; the lease will expire", "lease", fmt.Sprintf("%x", int64(t.Lease)), "ttl", t.TTL, "error", err)
		return
	}
	t.c.log.Info("resigned", "key", t.Key, "lease", fmt.Sprintf("%x", int64(t.Lease)))
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
