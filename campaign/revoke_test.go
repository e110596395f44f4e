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

// A revoke that the balancer sends to a member that answers nothing (here
// one of two endpoints, blackholed with its connection open, as a frozen
// member's is) is sent again, and the lease is gone when Revoke returns:
// the next candidate does not wait for the request timeout and then for
// the lease's expiry. Several terms, so that some revoke is picked for the
// silent endpoint first.
func TestRevokeResentPastSilentMember(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	silent, open := newProxy(t, cluster), newProxy(t, cluster)
	cli := etcdtest.NewClient(t, silent.Addr(), open.Addr())
	check := etcdtest.NewClient(t, cluster.Endpoints()...)
	f := newFixture(t, cli)
	for i := 0; i < 4; i++ {
		// Requests on both connections first, so that both are open.
		for j := 0; j < 4; j++ {
			if _, err := cli.Get(t.Context(), "warm"); err != nil {
				t.Fatal(err)
			}
		}
		a := f.lead()
		silent.Blackhole()
		a.Revoke()
		silent.Pass()
		resp, err := check.TimeToLive(t.Context(), a.Lease)
		if err != nil {
			t.Fatal(err)
		}
		if resp.TTL != -1 {
			t.Fatalf("term %d: the lease lives on (TTL %ds) once Revoke returned: the revoke waited on the silent member", i, resp.TTL)
		}
	}
}

// A term whose lease is revoked by someone else while its deadline is
// ahead ended early: its candidate campaigns again only once a TTL has
// passed (Campaigner.sitOut), as another term's lease may have gone in the
// same sweep while that term's child runs on. A term that revokes its own
// lease ended on time: its candidate campaigns again at once.
func TestEarlyEndSitsOutTheTTL(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	f := newFixture(t, etcdtest.NewClient(t, cluster.Endpoints()...))
	soon := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), f.ttl/4)
		t.Cleanup(cancel)
		return ctx
	}

	c := f.campaigner(false)
	a, err := c.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cli.Revoke(t.Context(), a.Lease); err != nil {
		t.Fatal(err)
	}
	if err := a.Lead(t.Context(), func(time.Duration) {}); !errors.Is(err, campaign.ErrKeyDeleted) && !errors.Is(err, campaign.ErrLeaseLost) {
		t.Fatalf("Lead after a revoke by hand: %v, want the term lost", err)
	}
	a.Revoke()
	if _, err := c.Campaign(soon()); !errors.Is(err, campaign.ErrNotLeader) {
		t.Fatalf("a campaign within a TTL of the early end: %v, want it to sit out (ErrNotLeader)", err)
	}
	if resp, err := f.cli.Get(t.Context(), f.l.QueuePrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("a campaign that sat out left %v queue keys (%v), want none", resp.Count, err)
	}

	c2 := f.campaigner(false)
	b, err := c2.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b.Revoke()
	b, err = c2.Campaign(soon())
	if err != nil {
		t.Fatalf("a campaign right after the term's own revoke: %v, want it elected", err)
	}
	b.Revoke()
}
