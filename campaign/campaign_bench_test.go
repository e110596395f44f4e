package campaign_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// These benchmarks run the campaign against a real etcd process (started by
// internal/testsupport/etcdtest, without fsync, so that they time the campaign's round
// trips rather than the disk). scripts/bench measures the whole tool, with
// fsync, side by side with etcdctl lock.

func benchClient(b *testing.B) *clientv3.Client {
	b.Helper()
	return etcdtest.Start(b, etcdtest.Options{}).Client(b)
}

var benchSeq int

func newCampaigner(b *testing.B, cli *clientv3.Client, election string, noWait bool) *campaign.Campaigner {
	b.Helper()
	benchSeq++
	c, err := campaign.New(campaign.Config{
		Client: cli, Layout: benchLayout(b, election), ID: fmt.Sprintf("bench-%d", benchSeq),
		Timing:         campaign.Timing{TTL: time.Minute, KillTimeout: campaign.DefaultKillTimeout, FenceMargin: campaign.DefaultFenceMargin(time.Minute)},
		RequestTimeout: 10 * time.Second, Now: bootclock.Now, NoWait: noWait,
	})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func benchLayout(b *testing.B, election string) campaign.Layout {
	b.Helper()
	l, err := campaign.NewLayout("bench/", election)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkCampaignUncontended is an uncontended term from nothing to
// leading and back: grant, campaign transaction, confirmation, revoke.
func BenchmarkCampaignUncontended(b *testing.B) {
	cli := benchClient(b)
	c := newCampaigner(b, cli, "uncontended", false)
	ctx := b.Context()
	for b.Loop() {
		t, err := c.Campaign(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t.Revoke()
	}
}

// BenchmarkHandoff is one graceful handoff inside one process: the leader
// revokes, the waiter behind it sees the delete, checks the lease, looks
// for other predecessors, confirms. A new waiter joins behind, untimed.
func BenchmarkHandoff(b *testing.B) {
	cli := benchClient(b)
	ctx := b.Context()
	const election = "handoff"
	won := make(chan *campaign.Term, 2)
	failed := make(chan error, 2)
	join := func() {
		c := newCampaigner(b, cli, election, false)
		go func() {
			t, err := c.Campaign(ctx)
			if err != nil {
				if ctx.Err() == nil {
					failed <- err
				}
				return
			}
			won <- t
		}()
	}
	next := func() *campaign.Term {
		select {
		case t := <-won:
			return t
		case err := <-failed:
			b.Fatal(err)
		case <-time.After(30 * time.Second):
			b.Fatal("no leader after 30s")
		}
		return nil
	}
	queued := func(n int64) {
		for {
			resp, err := cli.Get(ctx, benchLayout(b, election).QueuePrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				b.Fatal(err)
			}
			if resp.Count == n {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	join()
	leader := next()
	join()
	queued(2)
	for b.Loop() {
		leader.Revoke()
		leader = next()
		b.StopTimer()
		join()
		queued(2)
		b.StartTimer()
	}
	leader.Revoke()
}

// BenchmarkJoin is what a candidate costs to join a queue of N: grant, the
// campaign transaction (which reads the whole queue and every sentinel,
// keys only), revoke. It grows with N only through that read.
func BenchmarkJoin(b *testing.B) {
	cli := benchClient(b)
	ctx := b.Context()
	for _, n := range []int{5, 50, 500} {
		election := fmt.Sprintf("join-%d", n)
		l := benchLayout(b, election)
		for range n {
			lease, err := cli.Grant(ctx, 3600)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := cli.Txn(ctx).Then(
				clientv3.OpPut(l.QueueKey(lease.ID), "waiter", clientv3.WithLease(lease.ID)),
				clientv3.OpPut(l.SentinelKey(lease.ID), l.QueueKey(lease.ID), clientv3.WithLease(lease.ID)),
			).Commit(); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			c := newCampaigner(b, cli, election, true)
			for b.Loop() {
				if _, err := c.Campaign(ctx); !errors.Is(err, campaign.ErrNotLeader) {
					b.Fatalf("Campaign with %d ahead = %v, want ErrNotLeader", n, err)
				}
			}
		})
	}
}

// BenchmarkRenewal is one lease renewal: on a LeaseKeepAlive stream of its
// own, as clientv3's KeepAliveOnce sends it (and as terms renewed before
// they shared a stream), and as a term renews, on its client's one stream.
func BenchmarkRenewal(b *testing.B) {
	cli := benchClient(b)
	ctx := b.Context()
	b.Run("KeepAliveOnce", func(b *testing.B) {
		lease, err := cli.Grant(ctx, 60)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := cli.KeepAliveOnce(ctx, lease.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("term", func(b *testing.B) {
		t, err := newCampaigner(b, cli, "renewal", false).Grant(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer t.Revoke()
		for b.Loop() {
			if err := t.RenewOnce(ctx, 10*time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
}
