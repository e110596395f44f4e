package cli

import (
	"context"
	"encoding/json"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// status shows a holder's slot from its slot key, and from its term record
// once the slot key is gone while the record stands: the slot is still the
// holder's (docs/design.md, "More than one holder"). The keys are written
// as two holders of --holders 2 write them.
func TestStatusSlotFromRecord(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	l, err := campaign.NewLayout("test/", "slots")
	if err != nil {
		t.Fatal(err)
	}
	for slot, id := range []string{"a", "b"} {
		lease, err := cli.Grant(ctx, 600)
		if err != nil {
			t.Fatal(err)
		}
		q := l.QueueKey(lease.ID)
		rec, err := json.Marshal(campaign.TermRecord{Key: q, TTL: 600, Holders: 2, Slot: &slot})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Txn(ctx).Then(clientv3.OpPut(q, id, clientv3.WithLease(lease.ID)),
			clientv3.OpPut(l.SentinelKey(lease.ID), campaign.SentinelValue(q, 2, slot), clientv3.WithLease(lease.ID)),
			clientv3.OpPut(l.RecordKey(lease.ID), string(rec)),
			clientv3.OpPut(l.SlotKey(slot), q, clientv3.WithLease(lease.ID))).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, l.SlotKey(0)); err != nil {
		t.Fatal(err)
	}
	for _, one := range []*campaign.Layout{&l, nil} {
		els, err := readElections(ctx, cli, "test/", one)
		if err != nil {
			t.Fatal(err)
		}
		if len(els) != 1 || els[0].Holders != 2 || len(els[0].Holding) != 2 {
			t.Fatalf("status read %+v, want one election with two holders", els)
		}
		for i, h := range els[0].Holding {
			if h.Slot == nil || *h.Slot != i {
				t.Errorf("holder %s: slot %v, want %d", h.ID, h.Slot, i)
			}
		}
	}
}
