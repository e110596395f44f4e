package campaign_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// Elections of more than one holder (docs/design.md, "More than one
// holder"), on a real etcd: at most N terms hold at once, each in a slot of
// its own, and every fault that the wait of one holder covers is covered
// for each of the N.

// liveKeys are the election's valid queue keys, oldest first.
func liveKeys(t *testing.T, cli *clientv3.Client, l campaign.Layout) []string {
	t.Helper()
	resp, err := cli.Get(t.Context(), l.QueuePrefix(), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		if l.ValidQueueKey(kv) {
			keys = append(keys, string(kv.Key))
		}
	}
	return keys
}

// slotKeys are the election's slot keys with the lease each is on.
func slotKeys(t *testing.T, cli *clientv3.Client, l campaign.Layout) map[string]clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(t.Context(), l.SlotPrefix(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]clientv3.LeaseID{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = clientv3.LeaseID(kv.Lease)
	}
	return out
}

func TestHolders(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	ctx := t.Context()

	// Six candidates, N of them hold: the next in line says it is next
	// only from its wait, and nobody joins the N until one of them ends;
	// then exactly one does, in the slot that was freed, with a slot token
	// above the slot's last.
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("six-candidates-%d-holders", n), func(t *testing.T) {
			f := newFixture(t, cli)
			f.holders = n
			tl := newTestLog()
			f.log = tl
			defer func() {
				if t.Failed() {
					tl.mu.Lock()
					t.Log(strings.Join(tl.lines, "\n"))
					tl.mu.Unlock()
				}
			}()
			won := make(chan result, 6)
			for range 6 {
				ch := f.start(ctx)
				go func() { won <- <-ch }()
			}
			held := map[int]*campaign.Term{}
			take := func() *campaign.Term {
				t.Helper()
				tm := f.await(won)
				if tm.Slot < 0 || tm.Slot >= n {
					t.Fatalf("slot %d, want 0...%d", tm.Slot, n-1)
				}
				if o := held[tm.Slot]; o != nil {
					t.Fatalf("%s took slot %d, which %s holds", tm.Key, tm.Slot, o.Key)
				}
				if len(held) >= n {
					t.Fatalf("%s holds beside %d others, with %d holders", tm.Key, len(held), n)
				}
				held[tm.Slot] = tm
				hold(tm) // renewed, or its lease would expire
				return tm
			}
			for range n {
				take()
			}
			for rest := 6 - n; ; rest-- {
				keys := liveKeys(t, cli, f.l)
				if len(keys) != n+rest {
					t.Fatalf("%d candidates in etcd, want %d", len(keys), n+rest)
				}
				for _, tm := range held {
					if i := slices.Index(keys, tm.Key); i < 0 || i >= n {
						t.Errorf("%s holds at place %d in the queue, want one of the %d oldest", tm.Key, i, n)
					}
				}
				slots := slotKeys(t, cli, f.l)
				if len(slots) != len(held) {
					t.Errorf("%d slot keys %v for %d holders", len(slots), slots, len(held))
				}
				for i, tm := range held {
					if slots[f.l.SlotKey(i)] != tm.Lease {
						t.Errorf("slot %d on lease %x, want its holder's %x", i, int64(slots[f.l.SlotKey(i)]), int64(tm.Lease))
					}
				}
				if rest == 0 {
					break
				}
				// The next in line says so from its wait at first; later the
				// next in line may be one that no handoff woke (it watches
				// only the n terms nearest ahead), which reads again only
				// when one of those ends.
				if rest == 6-n {
					f.next(won, keys[n])
				}
				still(t, won, fmt.Sprintf("%d hold", n))
				freed := rest % n
				old := held[freed]
				old.Revoke()
				delete(held, freed)
				tm := take()
				if tm.Slot != freed || tm.SlotRev <= old.SlotRev {
					t.Errorf("the next term took slot %d (token %d), want the freed slot %d with a token above %d",
						tm.Slot, tm.SlotRev, freed, old.SlotRev)
				}
				if tm.Key != keys[n] {
					t.Errorf("%s holds next, want %s, the next in line", tm.Key, keys[n])
				}
			}
		})
	}

	// A holder's queue key deleted by hand: its term ends, and a newcomer
	// waits for its lease, which the sentinel shows, not beside the others.
	t.Run("queue-key-deleted", func(t *testing.T) {
		f := newFixture(t, cli)
		f.holders = 2
		a, _ := f.lead(), f.lead()
		held := hold(a)
		if _, err := cli.Delete(ctx, a.Key); err != nil {
			t.Fatal(err)
		}
		if err := awaitErr(t, held); !errors.Is(err, campaign.ErrKeyDeleted) {
			t.Fatalf("A's Lead = %v, want ErrKeyDeleted", err)
		}
		c := f.waiting(ctx, 2)
		f.waitsOnLease(c)
		if _, err := f.campaigner(true).Campaign(ctx); !errors.Is(err, campaign.ErrNotLeader) {
			t.Errorf("--no-wait beside two live older terms = %v, want ErrNotLeader", err)
		}
		still(t, c, "A's lease lives")
		a.Revoke()
		if tc := f.await(c); tc.Slot != a.Slot {
			t.Errorf("C took slot %d, want A's %d", tc.Slot, a.Slot)
		}
	})

	// A holder's sentinel, then its queue key, deleted by hand while its
	// lease lives: the waiter that watched them waits the lease out.
	t.Run("keys-deleted-lease-lives", func(t *testing.T) {
		f := newFixture(t, cli)
		f.holders = 2
		a, _ := f.lead(), f.lead()
		c := f.waiting(ctx, 2)
		f.next(c, newest(t, cli, f.l))
		if _, err := cli.Delete(ctx, a.Sentinel); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Delete(ctx, a.Key); err != nil {
			t.Fatal(err)
		}
		f.waitsOnLease(c)
		still(t, c, "A's lease lives")
		a.Revoke()
		f.await(c)
	})

	// A holder's slot key deleted by hand ends its term: another term could
	// take the slot.
	t.Run("slot-key-deleted", func(t *testing.T) {
		f := newFixture(t, cli)
		f.holders = 2
		a := f.lead()
		held := hold(a)
		if _, err := cli.Delete(ctx, f.l.SlotKey(a.Slot)); err != nil {
			t.Fatal(err)
		}
		fromWatch(t, awaitErr(t, held), campaign.ErrKeyDeleted)
	})

	// Every candidate of an election agrees on N: one that does not refuses
	// at once, leaving nothing in etcd, whichever number is the larger.
	t.Run("mismatch", func(t *testing.T) {
		for _, c := range []struct{ have, want int }{{2, 1}, {2, 3}, {1, 2}} {
			f := newFixture(t, cli)
			f.l, _ = campaign.NewLayout("test/", fmt.Sprintf("mismatch-%d-%d", c.have, c.want))
			f.holders = c.have
			a := f.lead()
			f.holders = c.want
			_, err := f.campaigner(false).Campaign(ctx)
			var he *campaign.HoldersError
			if !errors.As(err, &he) || he.Want != c.want || he.Found != c.have || he.Sentinel != a.Sentinel || !campaign.Permanent(err) {
				t.Fatalf("--holders %d beside a term of %d: %v, want a permanent HoldersError naming %s", c.want, c.have, err, a.Sentinel)
			}
			if !strings.Contains(err.Error(), "stop every candidate") {
				t.Errorf("the refusal %q does not say how to change the number", err)
			}
			if keys := liveKeys(t, cli, f.l); !slices.Equal(keys, []string{a.Key}) {
				t.Errorf("queue keys after the refusal %q, want only %s", keys, a.Key)
			}
			resp, err := cli.Get(ctx, f.l.SentinelPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Count != 1 {
				t.Errorf("%d sentinels after the refusal, want A's alone", resp.Count)
			}
		}
	})

	// With one holder nothing changes: the sentinel holds the queue key
	// alone, no slot key is written, and the slot token is the term's.
	// With more, the sentinel records N, and the slot once the term took
	// it, in the slot key's revision, keeping its own create revision.
	t.Run("layout", func(t *testing.T) {
		for _, n := range []int{1, 2} {
			f := newFixture(t, cli)
			f.l, _ = campaign.NewLayout("test/", fmt.Sprintf("layout-%d", n))
			f.holders = n
			a := f.lead()
			resp, err := cli.Get(ctx, a.Sentinel)
			if err != nil {
				t.Fatal(err)
			}
			want, mod := "^"+regexp.QuoteMeta(a.Key)+`$`, a.Rev
			if n > 1 {
				want, mod = fmt.Sprintf(`^%s slot=0 holders=%d$`, regexp.QuoteMeta(a.Key), n), a.SlotRev
			}
			if len(resp.Kvs) != 1 || !regexp.MustCompile(want).Match(resp.Kvs[0].Value) || resp.Kvs[0].CreateRevision != a.Rev ||
				resp.Kvs[0].ModRevision != mod || clientv3.LeaseID(resp.Kvs[0].Lease) != a.Lease {
				t.Fatalf("N=%d: sentinel %v, want the value matching %q on lease %x, created at %d, modified at %d",
					n, resp.Kvs, want, int64(a.Lease), a.Rev, mod)
			}
			if h := campaign.HoldersOf(resp.Kvs[0].Value); h != n {
				t.Errorf("N=%d: HoldersOf(%q) = %d", n, resp.Kvs[0].Value, h)
			}
			rec, err := cli.Get(ctx, a.Record)
			if err != nil || len(rec.Kvs) != 1 {
				t.Fatalf("N=%d: record %v (%v)", n, rec, err)
			}
			r, ok := campaign.ParseRecord(rec.Kvs[0].Value)
			switch {
			case !ok || r.Key != a.Key:
				t.Errorf("N=%d: record %q does not name the term", n, rec.Kvs[0].Value)
			case n == 1 && (r.Holders != 0 || r.Slot != nil):
				t.Errorf("one holder: record %q names holders or a slot", rec.Kvs[0].Value)
			case n > 1 && (r.Holders != n || r.Slot == nil || *r.Slot != 0 || rec.Kvs[0].ModRevision != a.SlotRev):
				t.Errorf("N=%d: record %q, modified at %d; want holders %d and slot 0, written with the slot key at %d", n, rec.Kvs[0].Value, rec.Kvs[0].ModRevision, n, a.SlotRev)
			}
			slots := slotKeys(t, cli, f.l)
			switch {
			case n == 1 && (len(slots) != 0 || a.Slot != 0 || a.SlotRev != a.Rev):
				t.Errorf("one holder: slot keys %v, slot %d, token %d; want none, 0, the term's %d", slots, a.Slot, a.SlotRev, a.Rev)
			case n > 1 && (len(slots) != 1 || slots[f.l.SlotKey(0)] != a.Lease || a.Slot != 0 || a.SlotRev <= a.Rev):
				t.Errorf("N=%d: slot keys %v, slot %d, token %d; want slot 0 on lease %x, created after %d", n, slots, a.Slot, a.SlotRev, int64(a.Lease), a.Rev)
			}
		}
	})
}

// keepAlive renews a lease for the rest of the test, as a frozen holder's
// lease lives on while nothing of its term acts: its guard may end the
// term's context, but nothing revokes the lease.
func keepAlive(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // before the term's revoke, registered earlier
	ch, err := cli.KeepAlive(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ch {
		}
	}()
}

// waitLine waits for a line of l with every one of parts, and fails if the
// campaign b ends first.
func waitLine(t *testing.T, l *testLog, b <-chan result, parts ...string) {
	t.Helper()
	deadline := time.After(safety)
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				l.mu.Unlock()
				return
			}
		}
		grew := l.grew
		l.mu.Unlock()
		select {
		case <-grew:
		case r := <-b:
			if r.term != nil {
				r.term.Revoke()
				t.Fatalf("the campaign ended in slot %d before a log line with %q", r.term.Slot, parts)
			}
			t.Fatalf("the campaign ended (%v) before a log line with %q", r.err, parts)
		case <-deadline:
			t.Fatalf("no log line with %q within %s", parts, safety)
		}
	}
}

// A slot or a number of holders that only a hand edit hides: a holder's
// slot key deleted while its lease lives (its holder frozen, so that its
// guard cannot stop its child), and a term's sentinel deleted while its
// queue key and lease live. Each frozen holder is a term whose lease the
// test keeps alive and which nothing else acts for.
func TestHoldersBounds(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	ctx := t.Context()

	// A's slot key deleted: its sentinel still records the slot, so the
	// waiter that a handoff lets in takes the slot that was freed, not A's.
	t.Run("slot-key-deleted-lease-lives", func(t *testing.T) {
		f := newFixture(t, cli)
		f.holders = 2
		a, b := f.lead(), f.lead()
		keepAlive(t, cli, a.Lease)
		c := f.waiting(ctx, 2)
		f.next(c, newest(t, cli, f.l))
		if _, err := cli.Delete(ctx, f.l.SlotKey(a.Slot)); err != nil {
			t.Fatal(err)
		}
		b.Revoke()
		if tc := f.await(c); tc.Slot != b.Slot {
			t.Errorf("C took slot %d, want B's %d: A (slot %d) still lives", tc.Slot, b.Slot, a.Slot)
		}
	})

	// A's slot key deleted and the other slot's key put by hand: no slot
	// is free while A's lease lives, and the end of that lease, which
	// takes only A's sentinel, frees A's slot.
	t.Run("slot-freed-with-lease", func(t *testing.T) {
		f := newFixture(t, cli)
		f.holders = 2
		a := f.lead()
		keepAlive(t, cli, a.Lease)
		if _, err := cli.Delete(ctx, f.l.SlotKey(a.Slot)); err != nil {
			t.Fatal(err)
		}
		other := f.l.SlotKey(1 - a.Slot)
		if _, err := cli.Put(ctx, other, "by hand"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = cli.Delete(context.Background(), other) })
		tl := newTestLog()
		f.log = tl
		c := f.start(ctx)
		waitLine(t, tl, c, "every slot is taken")
		still(t, c, "A's lease lives")
		a.Revoke()
		if tc := f.await(c); tc.Slot != a.Slot {
			t.Errorf("C took slot %d, want A's %d", tc.Slot, a.Slot)
		}
	})

	// Two terms choose a slot at once: C reads slot 0 free, then X takes
	// it and X's slot key is deleted by hand before C's create. The create
	// finds the slot key absent, but X's sentinel changed since C's read:
	// C reads again and takes the other slot.
	t.Run("concurrent-claim", func(t *testing.T) {
		f := newFixture(t, cli)
		f.holders = 2
		stall, inside, release := stallOnce()
		defer release()
		tl := newTestLog()
		tl.stall = func(msg string) {
			if msg == "taking slot" {
				stall()
			}
		}
		f.log = tl
		c := f.start(ctx)
		awaitClosed(t, inside, "C's choice of a slot")
		f.log = nil
		x := f.lead()
		keepAlive(t, cli, x.Lease)
		if _, err := cli.Delete(ctx, f.l.SlotKey(x.Slot)); err != nil {
			t.Fatal(err)
		}
		release()
		if tc := f.await(c); tc.Slot == x.Slot {
			t.Errorf("C took slot %d, which X holds", tc.Slot)
		}
	})

	// A holder's slot record wakes no waiter: D, behind A and B holding
	// and C waiting, watches B's and C's sentinels. A's end lets C hold,
	// which rewrites C's sentinel; D wakes first when B ends.
	t.Run("slot-record-wakes-nobody", func(t *testing.T) {
		f := newFixture(t, cli)
		f.holders = 2
		a, b := f.lead(), f.lead()
		c := f.waiting(ctx, 2)
		tl := newTestLog()
		f.log = tl
		d := f.waiting(ctx, 3)
		f.next(c, liveKeys(t, cli, f.l)[2])
		a.Revoke()
		tc := f.await(c)
		b.Revoke()
		td := f.await(d)
		if td.Slot != b.Slot {
			t.Errorf("D took slot %d, want B's %d", td.Slot, b.Slot)
		}
		woke := ""
		tl.mu.Lock()
		for _, l := range tl.lines {
			if strings.Contains(l, "predecessor moved") {
				woke = l
				break
			}
		}
		tl.mu.Unlock()
		if !strings.Contains(woke, "key="+b.Sentinel) {
			t.Errorf("D first woke with %q, want B's sentinel %s (C's is %s)", woke, b.Sentinel, tc.Sentinel)
		}
	})

	// A term of one holder whose sentinel was deleted by hand, its record
	// left: the record says its number of holders, and a candidate of two
	// refuses, as beside its sentinel.
	t.Run("record-says-n", func(t *testing.T) {
		f := newFixture(t, cli)
		f.holders = 1
		a := f.lead()
		keepAlive(t, cli, a.Lease)
		if _, err := cli.Delete(ctx, a.Sentinel); err != nil {
			t.Fatal(err)
		}
		f.holders = 2
		var he *campaign.HoldersError
		if tn, err := f.campaigner(false).Campaign(ctx); !errors.As(err, &he) || he.Found != 1 || he.Sentinel != a.Record {
			if tn != nil {
				tn.Revoke()
			}
			t.Errorf("a candidate of two beside a term of one without its sentinel = %v, want a HoldersError naming its record", err)
		}
		a.Revoke()
	})

	// A term of one holder whose sentinel and record were deleted by hand,
	// its queue key and lease alive: its number of holders is unknown, so
	// a candidate of two waits for its lease as for a term of one, and one
	// that may not wait gives up.
	t.Run("bare-queue-key-blocks", func(t *testing.T) {
		f := newFixture(t, cli)
		f.holders = 1
		a := f.lead()
		keepAlive(t, cli, a.Lease)
		if _, err := cli.Txn(ctx).Then(clientv3.OpDelete(a.Sentinel), clientv3.OpDelete(a.Record)).Commit(); err != nil {
			t.Fatal(err)
		}
		f.holders = 2
		if tn, err := f.campaigner(true).Campaign(ctx); !errors.Is(err, campaign.ErrNotLeader) {
			if tn != nil {
				tn.Revoke()
			}
			t.Errorf("--no-wait beside a term of unknown N = %v, want ErrNotLeader", err)
		}
		c := f.waiting(ctx, 0)
		f.next(c, newest(t, cli, f.l))
		still(t, c, "A's lease lives")
		a.Revoke()
		f.await(c)
	})

	// A waiter whose own sentinel is deleted by hand leaves at once: its
	// bare queue key would block the candidates behind it.
	t.Run("waiter-sentinel-deleted", func(t *testing.T) {
		f := newFixture(t, cli)
		f.holders = 2
		f.lead()
		f.lead()
		c := f.waiting(ctx, 2)
		resp, err := cli.Get(ctx, f.l.SentinelPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Delete(ctx, string(resp.Kvs[0].Key)); err != nil {
			t.Fatal(err)
		}
		endsFromWatch(t, c, campaign.ErrKeyDeleted)
	})
}
