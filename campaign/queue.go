package campaign

import (
	"context"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Two questions about the queue that decide nothing of the barrier, only
// whether stepping down helps (docs/design.md, "Health and eligibility"):
// does a candidate wait behind this term, and is there no candidate at all.

// Waiting reports whether a valid queue key newer than the term's own is
// in etcd: a candidate that would take over if the term ended.
func (t *Term) Waiting(ctx context.Context) (bool, error) {
	l := t.c.cfg.Layout
	var resp *clientv3.GetResponse
	err := t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) (err error) {
		resp, err = t.c.cfg.Client.Get(rctx, l.QueuePrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithMinCreateRev(t.Rev+1))
		return err
	})
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(resp.Kvs, l.ValidQueueKey), nil
}

// Ping asks etcd one small question (whether the election is paused, by
// count): a candidate that holds no lease while it sits out or is not
// eligible learns so that etcd still answers, which keeps its health true.
func (c *Campaigner) Ping(ctx context.Context) error {
	return c.request(ctx, c.cfg.RequestTimeout, func(rctx context.Context) error {
		_, err := c.cfg.Client.Get(rctx, c.cfg.Layout.PauseKey(), clientv3.WithCountOnly())
		return err
	})
}

// AwaitVacant returns once no valid queue key is in etcd: the election has
// no candidate, so none leads. It reads the queue, and after each delete
// under it reads again; an error or ctx's end returns first.
func (c *Campaigner) AwaitVacant(ctx context.Context) error {
	l := c.cfg.Layout
	for {
		var resp *clientv3.GetResponse
		err := retry(ctx, func() error {
			return c.request(ctx, c.cfg.RequestTimeout, func(rctx context.Context) (err error) {
				resp, err = c.cfg.Client.Get(rctx, l.QueuePrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
				return err
			})
		})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(resp.Kvs, l.ValidQueueKey) {
			return nil
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for w := range c.cfg.Client.Watch(wctx, l.QueuePrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut()) {
			if w.Err() != nil || slices.ContainsFunc(w.Events, func(e *clientv3.Event) bool { return e.Type == mvccpb.DELETE }) {
				break
			}
		}
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
