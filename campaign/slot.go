package campaign

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// takeSlot gives a term that may hold, in an election of N > 1 holders,
// the lowest free slot (docs/design.md, "More than one holder"): a key
// P.slot/<i> created only if absent, attached to the term's lease, so that
// it goes with the lease and, while the lease lives, no other term can take
// it. The same transaction records i in the term's record, which outlives
// the lease until the term's child is known gone (record.go): a slot key
// deleted by hand, or a lease ended early, then frees no slot while its
// holder, frozen perhaps, may still run a child in it. (The sentinel
// records i too, for an older etcdlead, which reads it there.) At most N
// terms that passed the wait live at once, for the reason at most N
// children run, so one of the N slots is free unless a slot key was put by
// hand; then the term waits for a slot key or a record to change. It also
// starts the slot's guard.
func (t *Term) takeSlot(ctx context.Context) error {
	l, n := t.c.cfg.Layout, t.c.holders()
	for {
		slots, records, ran, rev, err := t.readSlots(ctx)
		if err != nil {
			return t.waitErr(ctx, err)
		}
		// An earlier attempt of the transaction below committed but its
		// answer was lost: the slot is ours.
		if i := slices.IndexFunc(slots, func(kv *mvccpb.KeyValue) bool { return clientv3.LeaseID(kv.Lease) == t.Lease }); i >= 0 {
			return t.tookSlot(string(slots[i].Key), slots[i].CreateRevision)
		}
		free, done := t.freeSlot(slots, records, ran)
		if free < 0 && done {
			return runDone(t.c.cfg.RunID, rev)
		}
		if free < 0 {
			t.c.log.Warn("every slot is taken; waiting for one to be freed", "slots", l.SlotPrefix(), "holders", n)
			if err := t.slotFreed(ctx, rev); err != nil {
				return err
			}
			continue
		}
		if took, err := t.claimSlot(ctx, free, rev); took || err != nil {
			return err
		}
		// Another term took a slot or a record changed between the read
		// and the transaction, or the own keys went: read again, which
		// says which.
	}
}

// freeSlot is the lowest slot that neither a slot key nor another term's
// record takes, or -1; done says a slot is free but ran the firing
// already. With a run id, a free slot that ran the firing already is no
// use: its record refuses the start. Another free slot may not have run it
// yet.
func (t *Term) freeSlot(slots, records []*mvccpb.KeyValue, ran map[int]bool) (free int, done bool) {
	l, n := t.c.cfg.Layout, t.c.holders()
	taken := map[string]bool{}
	for _, kv := range slots {
		taken[string(kv.Key)] = true
	}
	for _, kv := range records {
		id, valid := l.RecordLease(kv)
		if r, ok := ParseRecord(kv.Value); ok && valid && id != t.Lease && r.Slot != nil && *r.Slot >= 0 && *r.Slot < n {
			taken[l.SlotKey(*r.Slot)] = true
		}
	}
	for i := range n {
		switch {
		case taken[l.SlotKey(i)]:
		case ran[i]:
			done = true
		default:
			return i, done
		}
	}
	return -1, done
}

// claimSlot creates slot free's key if it is still free at rev, and
// records the slot (took, with tookSlot's error); took false and no error
// is a read to make again.
//
// The create compares, besides the slot key's absence and the own keys
// (the puts must not bring back a key deleted by hand), that no record was
// created or rewritten since the read: a term that took this slot in
// between and had its slot key deleted by hand since leaves the key
// absent, but not its record.
func (t *Term) claimSlot(ctx context.Context, free int, rev int64) (took bool, err error) {
	l, n := t.c.cfg.Layout, t.c.holders()
	key := l.SlotKey(free)
	if t.c.log.IsDebug() {
		t.c.log.Debug("taking slot", "key", key, "rev", rev)
	}
	var tresp *clientv3.TxnResponse
	err = retry(ctx, func() error {
		return t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) (err error) {
			tresp, err = t.c.cfg.Client.Txn(rctx).
				If(append(t.intact(), clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
					clientv3.Compare(clientv3.ModRevision(l.RecordPrefix()), "<", rev+1).WithPrefix())...).
				Then(clientv3.OpPut(key, t.Key, clientv3.WithLease(t.Lease)),
					clientv3.OpPut(t.Sentinel, SentinelValue(t.Key, n, free), clientv3.WithLease(t.Lease)),
					clientv3.OpPut(t.Record, t.withSlot(free).value())).
				Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
				Commit()
			return err
		})
	})
	if err != nil {
		return false, t.waitErr(ctx, err)
	}
	if tresp.Succeeded {
		return true, t.tookSlot(key, tresp.Header.Revision)
	}
	if kvs := tresp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && clientv3.LeaseID(kvs[0].Lease) == t.Lease {
		return true, t.tookSlot(key, kvs[0].CreateRevision)
	}
	return false, nil
}

// readSlots reads, at one revision, the slot keys, the records that may
// record a slot and the slots that ran the run id, with the own keys
// intact (else an error wrapping ErrKeyDeleted). A term that holds a slot
// had fewer than N older terms, ended ones counted, when it passed its
// wait, so its record is among the N oldest valid ones: the records are
// read oldest first, on past foreign keys, until N valid ones are in.
func (t *Term) readSlots(ctx context.Context) (slots, records []*mvccpb.KeyValue, ran map[int]bool, rev int64, err error) {
	l, n := t.c.cfg.Layout, t.c.holders()
	oldest := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)}
	mine := false
	err = retry(ctx, func() error {
		return t.c.request(ctx, t.c.cfg.RequestTimeout, func(rctx context.Context) error {
			resp, err := t.c.cfg.Client.Txn(rctx).
				If(t.intact()...).
				Then(append([]clientv3.Op{clientv3.OpGet(l.SlotPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
					clientv3.OpGet(l.RecordPrefix(), append(oldest, clientv3.WithLimit(int64(startReadPage+n-1)))...)},
					t.c.readRun()...)...).
				Commit()
			if err != nil {
				return err
			}
			if mine = resp.Succeeded; !mine {
				return nil
			}
			rev = resp.Header.Revision
			if len(resp.Responses) > 2 {
				ran = t.c.ranSlots(resp.Responses[2].GetResponseRange().Kvs)
			}
			slots = resp.Responses[0].GetResponseRange().Kvs
			r := resp.Responses[1].GetResponseRange()
			records = r.Kvs
			if r.More && countFunc(records, l.ValidRecord) < n {
				records, err = t.readAt(rctx, l.RecordPrefix(), rev, oldest)
			}
			return err
		})
	})
	if err == nil && !mine {
		err = fmt.Errorf("taking a slot: %w", ErrKeyDeleted)
	}
	return slots, records, ran, rev, err
}

func (t *Term) tookSlot(key string, rev int64) error {
	i, err := strconv.Atoi(key[len(t.c.cfg.Layout.SlotPrefix()):])
	if err != nil || i < 0 || i >= t.c.holders() {
		return fmt.Errorf("slot key %s: not one of %d slots", key, t.c.holders())
	}
	t.Slot, t.SlotRev, t.slotKey = i, rev, key
	t.rec = t.withSlot(i)
	// Deleted or put again, the slot key could be taken by another term,
	// and two children would share the slot.
	t.guardKeys([]owned{{key: key, created: rev, lease: t.Lease}}, false, rev)
	return nil
}

// slotFreed returns once a key under the slot prefix or the record prefix
// changed after rev: a slot whose key was deleted by hand is freed only
// when its holder's record goes.
func (t *Term) slotFreed(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	l := t.c.cfg.Layout
	ws, stop := t.watchAll(wctx, []string{l.SlotPrefix(), l.RecordPrefix()}, rev, clientv3.WithPrefix())
	defer stop()
	select {
	case <-ws:
		return nil
	case <-ctx.Done():
		return t.waitErr(ctx)
	}
}
