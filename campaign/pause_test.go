package campaign_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// The pause at the campaign's level: a put of the pause key ends the
// leader's and the waiter's terms (the guard); a term enqueued while it
// lasts never leads (the enqueue's read), and its candidate then waits
// for the resume holding no lease, or under NoWait gives up; WaitIdle
// returns once every term from before the pause has revoked its lease.
func TestPauseEndsTermsAndRefusesStarts(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	f := newFixture(t, cli)
	a := f.lead()
	held := make(chan error, 1)
	go func() { held <- a.Lead(t.Context(), func(time.Duration) {}) }()
	b := f.waiting(t.Context(), 1)
	rev, err := campaign.Pause(t.Context(), cli, f.l, campaign.PauseRecord{By: "test", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-held:
		fromWatch(t, err, campaign.ErrPaused)
	case <-time.After(safety):
		t.Fatalf("the leader's term did not end within %s of the pause", safety)
	}
	endsFromWatch(t, b, campaign.ErrPaused)
	var alive []clientv3.LeaseID
	idle := make(chan result, 1)
	go func() {
		var err error
		alive, err = campaign.WaitIdle(t.Context(), cli, f.l, rev)
		idle <- result{err: err}
	}()
	still(t, idle, "WaitIdle while the leader's lease lives")
	a.Revoke() // as the runner does, once the child is gone
	select {
	case r := <-idle:
		if r.err != nil || len(alive) > 0 {
			t.Fatalf("WaitIdle: leases %v alive, %v", alive, r.err)
		}
	case <-time.After(safety):
		t.Fatalf("WaitIdle did not return within %s of the revoke", safety)
	}

	c := f.campaigner(false)
	if _, err := c.Campaign(t.Context()); !errors.Is(err, campaign.ErrPaused) {
		t.Fatalf("a campaign while paused: %v, want %v", err, campaign.ErrPaused)
	}
	again := make(chan result, 1)
	go func() {
		t, err := c.Campaign(t.Context())
		again <- result{t, err}
	}()
	still(t, again, "a campaign after one that found the pause")
	resp, err := cli.Get(t.Context(), f.l.QueuePrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Fatalf("%d queue keys while paused: a paused candidate holds no lease", resp.Count)
	}
	nw := f.campaigner(true)
	for range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), safety)
		_, err := nw.Campaign(ctx)
		cancel()
		if !errors.Is(err, campaign.ErrPaused) {
			t.Fatalf("a campaign under NoWait while paused: %v, want %v", err, campaign.ErrPaused)
		}
	}
	if was, err := campaign.Resume(t.Context(), cli, f.l); err != nil || !was {
		t.Fatalf("Resume: %v, %v", was, err)
	}
	f.await(again)
}
