package e2e

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// Hand edits of a frozen holder's keys that hide its slot or its number of
// holders from a newcomer (docs/design.md, "More than one holder"): the
// newcomer must still keep out of the frozen holder's slot, or out of its
// way altogether, until the frozen holder's lease is gone. The probes'
// slot and count locks and the etcd revisions judge, not the clock.

// readyField is the value of field name ("slot", "slot_rev") in a probe's
// ready line.
func readyField(t *testing.T, line, name string) string {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s= in the ready line %q", name, line)
	return ""
}

// deletedAt watches key from now on and returns a function that waits for
// its delete and returns the delete's revision.
func deletedAt(t *testing.T, cli *clientv3.Client, key string) func() int64 {
	t.Helper()
	ctx := ctxT(t)
	resp, err := cli.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 1 {
		t.Fatalf("%s: %d keys, want 1", key, resp.Count)
	}
	ch := cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut())
	return func() int64 {
		t.Helper()
		for r := range ch {
			for _, ev := range r.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return ev.Kv.ModRevision
				}
			}
		}
		t.Fatalf("%s: the watch ended without a delete", key)
		return 0
	}
}

// waitsInQueue waits until c says that it waits on a predecessor, and
// fails if it says first that every slot is taken: with no slot key put by
// hand, only a term let past its wait beside N older terms finds none free.
func waitsInQueue(t *testing.T, c *candidate) {
	t.Helper()
	timeout := time.After(safety)
	for {
		all, closed, changed := c.log.snapshot()
		for _, l := range all {
			if strings.Contains(l, "every slot is taken") {
				t.Fatalf("%s ended its wait beside 2 older terms: %q", c.name, l)
			}
			if strings.Contains(l, "waiting on predecessor") {
				return
			}
		}
		if closed {
			t.Fatalf("%s ended without waiting on a predecessor; it said:\n%s", c.name, strings.Join(all, "\n"))
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%s did not wait on a predecessor within %s", c.name, safety)
		}
	}
}

// journalIndex is the index of the first journal line that starts with
// prefix, or -1.
func journalIndex(lines []string, prefix string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return i
		}
	}
	return -1
}

// With --holders 2, c1 (slot 0) is frozen and its slot key deleted by
// hand: its frozen guard cannot stop its child, which its fence stops only
// later (and which ignores SIGTERM, so it lives for the kill timeout
// after). A newcomer c3 queued behind c1 and c2, let in when c2 stops, must
// take c2's slot, not c1's, for as long as c1's lease lives: its slot key
// is created either in slot 1 or after c1's lease ended.
func TestHoldersFrozenHolderSlotKeyDeleted(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	e := newEnv(t, cluster.Endpoints())
	l, err := campaign.NewLayout(e.prefix, "probe")
	if err != nil {
		t.Fatal(err)
	}
	flags := holdersFlags(2)
	c1 := e.start("c1", flags, e.probe("-holders", "2", "-ignore-term"))
	ready1, _ := c1.out.waitFor(t, "c1", "ready", 0)
	c2 := e.start("c2", flags, e.probe("-holders", "2"))
	ready2, _ := c2.out.waitFor(t, "c2", "ready", 0)
	slot1, slot2 := readyField(t, ready1, "slot"), readyField(t, ready2, "slot")
	if slot1 != "0" || slot2 != "1" {
		// The lowest free slot is taken: c3 would take slot 0 if it
		// thought it free, the one this test keeps c1 in.
		t.Fatalf("c1 in slot %s, c2 in slot %s: want 0 and 1", slot1, slot2)
	}
	_, lease1 := leaseOf(t, cli, e.prefix, "c1")
	c1Ended := deletedAt(t, cli, l.SentinelKey(lease1))

	c1.signal(t, syscall.SIGSTOP)
	del(t, cli, l.SlotKey(0))
	c3 := e.start("c3", flags, e.probe("-holders", "2"))
	waitsInQueue(t, c3)
	c2.stop(t)
	ready3, _ := c3.out.waitFor(t, "c3", "ready", 0)
	slot3 := readyField(t, ready3, "slot")
	slotRev3, err := strconv.ParseInt(readyField(t, ready3, "slot_rev"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	c1.log.waitFor(t, "c1", "fence: lease deadline near", 0)
	if ended := c1Ended(); slot3 == slot1 && slotRev3 < ended {
		t.Errorf("c3 took frozen c1's slot %s at revision %d, before c1's lease ended at %d", slot3, slotRev3, ended)
	}
	c1.signal(t, syscall.SIGCONT)
	stopAll(t, e, c1, c2, c3)
}

// A frozen leader of --holders 1 whose sentinel and record are deleted by
// hand, its queue key and lease alive: a newcomer of --holders 2 cannot read the
// leader's number of holders, so it takes the leader for a term of one and
// waits for its lease, instead of starting beside it (one older term is
// fewer than two) or exiting 125 (it has nothing to disagree with). The
// leader's probe takes slot 0's lock as the newcomer's would.
func TestHoldersNewcomerWaitsForLeaderWithoutSentinel(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	e := newEnv(t, cluster.Endpoints())
	l, err := campaign.NewLayout(e.prefix, "probe")
	if err != nil {
		t.Fatal(err)
	}
	c1 := e.start("c1", fast, e.probe("-holders", "1"))
	c1.out.waitFor(t, "c1", "ready", 0)
	key1, lease1 := leaseOf(t, cli, e.prefix, "c1")
	c1Ended := deletedAt(t, cli, key1)

	c1.signal(t, syscall.SIGSTOP)
	del(t, cli, l.SentinelKey(lease1))
	del(t, cli, l.RecordKey(lease1))
	c3 := e.start("c3", holdersFlags(2), e.probe("-holders", "2"))
	ready3, _ := c3.out.waitFor(t, "c3", "ready", 0)
	slotRev3, err := strconv.ParseInt(readyField(t, ready3, "slot_rev"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if ended := c1Ended(); slotRev3 <= ended {
		t.Errorf("c3 took a slot at revision %d, before c1's lease ended at %d", slotRev3, ended)
	}
	if _, ok := c3.log.find("number of holders is unknown"); !ok {
		t.Errorf("c3 did not say that it waits for a term of an unknown number of holders")
	}
	c1.log.waitFor(t, "c1", "fence: lease deadline near", 0)
	// The fence's SIGTERM reached c1's child, which says so in the journal
	// as it stops, before c3's child started.
	lines := e.journalLines(t)
	if stop, start := journalIndex(lines, "stop id=c1"), journalIndex(lines, "start id=c3"); stop < 0 || start < stop {
		t.Errorf("journal: c1's child stopped at line %d, c3's started at line %d; want c1's stop first:\n%s",
			stop, start, strings.Join(lines, "\n"))
	}
	c1.signal(t, syscall.SIGCONT)
	stopAll(t, e, c1, c3)
}
