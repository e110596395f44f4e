package campaign_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdtest"
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
			t.Fatalf("A's Hold = %v, want ErrKeyDeleted", err)
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
	// With more, the sentinel records N.
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
			want := a.Key
			if n > 1 {
				want = fmt.Sprintf("%s holders=%d", a.Key, n)
			}
			if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
				t.Errorf("N=%d: sentinel %v, want the value %q", n, resp.Kvs, want)
			}
			if h := campaign.HoldersOf(resp.Kvs[0].Value); h != n {
				t.Errorf("N=%d: HoldersOf(%q) = %d", n, resp.Kvs[0].Value, h)
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
