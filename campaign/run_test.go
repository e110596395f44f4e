package campaign_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// A run id at the campaign's level: the term that may start records the
// id, on a lease of its own, before Campaign returns it; a candidate that
// waited behind it, and one that comes after it, refuse with ErrRunDone
// and leave no key behind; a record taken back (ForgetRun) lets the next
// candidate run the firing; with N holders each slot runs it once, and a
// newcomer takes a slot that has not; an expired record lets it run again.
func TestRunIDOncePerFiring(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)

	t.Run("once", func(t *testing.T) {
		f := newFixture(t, cli)
		f.runID, f.runTTL = "20261205T1000", time.Minute
		a := f.lead()
		rec := record(t, cli, f.l.RunKey(f.runID, 0))
		if rec == nil {
			t.Fatalf("no record at %s once the term may start", f.l.RunKey(f.runID, 0))
		}
		if rec.Lease == 0 || clientv3.LeaseID(rec.Lease) == a.Lease {
			t.Fatalf("the record's lease is %x: want one of its own, not the term's %x", rec.Lease, a.Lease)
		}
		var r campaign.RunRecord
		if err := json.Unmarshal(rec.Value, &r); err != nil || r.By != "c1" || r.Key != a.Key {
			t.Fatalf("record %q (%v): want by c1, key %s", rec.Value, err, a.Key)
		}
		f.refused(f.start(t.Context()), "a candidate while the run's term holds")
		a.Revoke() // the child ran and ended
		f.refused(f.start(t.Context()), "a candidate that came after the run")
		if n := count(t, cli, f.l.QueuePrefix()) + count(t, cli, f.l.SentinelPrefix()); n != 0 {
			t.Fatalf("%d keys left by refused candidates", n)
		}
		if record(t, cli, f.l.RunKey(f.runID, 0)) == nil {
			t.Fatal("the record went with the term that made it")
		}
	})

	// A candidate queued before the firing was recorded learns of it
	// when its turn comes: here the record is put by hand while it waits
	// behind a term of a candidate without a run id.
	t.Run("waiter", func(t *testing.T) {
		f := newFixture(t, cli)
		a := f.lead()
		f.runID, f.runTTL = "queued", time.Minute
		b := f.waiting(t.Context(), 1)
		if _, err := cli.Put(t.Context(), f.l.RunKey(f.runID, 0), "{}", clientv3.WithLease(grant(t, cli))); err != nil {
			t.Fatal(err)
		}
		a.Revoke()
		f.refused(b, "the candidate that waited while the run was recorded")
	})

	t.Run("forget", func(t *testing.T) {
		f := newFixture(t, cli)
		f.runID, f.runTTL = "retry", time.Minute
		a := f.lead()
		a.ForgetRun() // its child failed, and retries are allowed
		if record(t, cli, f.l.RunKey(f.runID, 0)) != nil {
			t.Fatal("the record stayed after ForgetRun")
		}
		b := f.waiting(t.Context(), 1)
		a.Revoke()
		f.await(b)
	})

	t.Run("holders", func(t *testing.T) {
		f := newFixture(t, cli)
		f.runID, f.runTTL, f.holders = "sharded", time.Minute, 2
		a, b := f.lead(), f.lead()
		for slot := range 2 {
			if record(t, cli, f.l.RunKey(f.runID, slot)) == nil {
				t.Fatalf("no record of slot %d", slot)
			}
		}
		f.refused(f.start(t.Context()), "a third candidate once both slots ran")
		a.Revoke()
		b.Revoke()

		// Slot 0 ran and is free again, slot 1 never ran: a newcomer
		// takes slot 1, not the lower slot that would refuse it.
		f.runID = "half"
		a = f.lead()
		a.Revoke()
		if c := f.lead(); c.Slot != 1 {
			t.Fatalf("the newcomer took slot %d, which ran the firing already; want slot 1", c.Slot)
		}
		f.refused(f.start(t.Context()), "a candidate once both slots ran")
	})

	t.Run("expiry", func(t *testing.T) {
		f := newFixture(t, cli)
		f.ttl = campaign.MinTTL
		f.runID, f.runTTL = "short", campaign.MinTTL
		a := f.lead()
		key := f.l.RunKey(f.runID, 0)
		rec := record(t, cli, key)
		a.Revoke()
		f.refused(f.start(t.Context()), "a candidate while the record lives")
		ctx, cancel := context.WithTimeout(t.Context(), safety)
		defer cancel()
		for w := range cli.Watch(ctx, key, clientv3.WithRev(rec.ModRevision+1), clientv3.WithFilterPut()) {
			if w.Err() != nil || len(w.Events) > 0 {
				break
			}
		}
		if record(t, cli, key) != nil {
			t.Fatalf("the record did not expire within %s", safety)
		}
		f.await(f.start(t.Context()))
	})
}

// refused awaits a campaign that must end with ErrRunDone.
func (f *fixture) refused(ch <-chan result, who string) {
	f.t.Helper()
	select {
	case r := <-ch:
		if !errors.Is(r.err, campaign.ErrRunDone) {
			if r.term != nil {
				r.term.Revoke()
			}
			f.t.Fatalf("%s: %v, want %v", who, r.err, campaign.ErrRunDone)
		}
	case <-time.After(safety):
		f.t.Fatalf("%s: no end within %s", who, safety)
	}
}

func record(t *testing.T, cli *clientv3.Client, key string) *mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	return resp.Kvs[0]
}

func count(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}
