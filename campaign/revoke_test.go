package campaign_test

import (
	"testing"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// A revoke that the balancer sends to a member that answers nothing (here
// one of two endpoints, blackholed with its connection open, as a frozen
// member's is) is sent again, and the lease is gone when Revoke returns:
// the next candidate does not wait for the request timeout and then for
// the lease's expiry. Several terms, so that some revoke is picked for the
// silent endpoint first.
func TestRevokeResentPastSilentMember(t *testing.T) {
	skipIfShort(t)
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
		if rec, err := check.Get(t.Context(), a.Record); err != nil || len(rec.Kvs) != 0 {
			t.Fatalf("term %d: the record is still there once Revoke returned (%v)", i, err)
		}
	}
}
