package campaign

import (
	"context"
	"time"
)

// RenewOnce is one renewal attempt, for the external tests and benchmarks.
func (t *Term) RenewOnce(ctx context.Context, bound time.Duration) error {
	return t.renewOnce(ctx, bound)
}

// Grant is a term with a lease and nothing else (no keys, no guard), so
// that a test can see what the renewals alone do.
func (c *Campaigner) Grant(ctx context.Context) (*Term, error) { return c.grant(ctx) }

// ProgressAsks is how many times the term's watch stream has been asked
// for progress (each ask may send a request more than once).
func (t *Term) ProgressAsks() int64 {
	if s := t.termStream(); s != nil {
		return s.Asked()
	}
	return 0
}

// GuardEvery is the guard's pace of asking.
func GuardEvery(ttl time.Duration) time.Duration { return guardEvery(ttl) }
