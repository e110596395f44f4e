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
