package e2e

import (
	"context"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
	"github.com/etcdlead/etcdlead/internal/testsupport/faultproxy"
	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
)

// The sweep: an etcd raft leader member whose whole process was paused
// (SIGSTOP) for longer than the TTL revokes, as it resumes, the leases it
// last knew of, although a newer raft leader renewed them meanwhile
// (etcd 3.6.16; docs/design.md, "The term record"). A swept leader's
// child runs on after its lease is gone: until its supervisor's stop (one
// watch event plus --kill-timeout) or, if the supervisor cannot act,
// until its keeper's fence. Nothing may start beside it then.
//
// These tests judge by the probes' lock (a second child at once says
// OVERLAP, which stopAll's journal check fails on), by when the old child
// ended (a pidfd), and by etcd's own state (which leases went, and when);
// not by the log lines of the mechanism that waits a swept term out, which
// is the part that changes.

var (
	sweepRoundsFlag  = flag.Int("sweep.rounds", 10, "rounds with leases revoked by hand in TestSweepFreshCandidate and TestSweepCronLine")
	sweepFreezesFlag = flag.Int("sweep.freezes", 4, "most rounds with the raft leader member frozen in those tests; they stop once the sweep hit in -sweep.hits")
	sweepHitsFlag    = flag.Int("sweep.hits", 1, "rounds in which a frozen member's sweep must hit before those tests stop freezing")
)

// sweepTTL is the candidates' TTL in the sweep tests.
const sweepTTL = 2 * time.Second

// sweepFreeze is how long the raft leader member stays frozen: at least
// the three TTLs, and longer, because any freeze past the TTL may
// sweep, but whether the resumed member revokes is a race inside it: its
// lessor must find the leases expired before the member steps down, its
// check of its own leadership must come after its first raft tick
// (etcdserver's isActive), and its revokes must be proposed once it knows
// the new raft leader, all within milliseconds of SIGCONT. Longer freezes
// hit more often; none hits every time, so the frozen rounds count their
// hits and the revoked rounds do what a hit does, every time.
const sweepFreeze = 5 * sweepTTL

// sweepFlags are the flags of a candidate at sweepTTL in election el.
func sweepFlags(el string) []string {
	return []string{"--ttl=" + sweepTTL.String(), "--log-level=debug", "--election=" + el}
}

// sweptFlags are those of a candidate that the sweep may hit while it
// leads: about the longest --kill-timeout that fits the TTL (K + m + r <=
// 2T/3), so that its child, which ignores SIGTERM, outlives its
// supervisor's stop by 800ms rather than the default TTL/4; and --once, so
// that a candidate whose term ended (the freeze itself may fence the
// leader's, at this TTL) leaves rather than queueing again under a lease
// the sweep does not take, ahead of the fresh candidate.
func sweptFlags(el string) []string {
	return append(sweepFlags(el), "--kill-timeout=800ms", "--once")
}

// queueKeys reads the election's queue keys (those on a lease, one segment
// under qp, the election prefix and "/"), oldest first, and the revision
// read at.
func queueKeys(t *testing.T, cli *clientv3.Client, qp string) ([]*mvccpb.KeyValue, int64) {
	t.Helper()
	resp, err := cli.Get(ctxT(t), qp, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatalf("read %s: %v", qp, err)
	}
	var kvs []*mvccpb.KeyValue
	for _, kv := range resp.Kvs {
		if kv.Lease != 0 && !strings.Contains(strings.TrimPrefix(string(kv.Key), qp), "/") {
			kvs = append(kvs, kv)
		}
	}
	return kvs, resp.Header.Revision
}

// queuedLease waits, by a watch, until candidate id has a queue key under
// qp, and returns that key's lease.
func queuedLease(t *testing.T, cli *clientv3.Client, qp, id string) clientv3.LeaseID {
	t.Helper()
	kvs, rev := queueKeys(t, cli, qp)
	for _, kv := range kvs {
		if string(kv.Value) == id {
			return clientv3.LeaseID(kv.Lease)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	for wr := range cli.Watch(ctx, qp, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			t.Fatalf("watch %s: %v", qp, err)
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut && string(ev.Kv.Value) == id && ev.Kv.Lease != 0 {
				return clientv3.LeaseID(ev.Kv.Lease)
			}
		}
	}
	t.Fatalf("no queue key of %s under %s within %s", id, qp, safety)
	return 0
}

// leaseGone says whether etcd has no lease id (any more).
func leaseGone(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) bool {
	t.Helper()
	resp, err := cli.TimeToLive(ctxT(t), id)
	if err != nil {
		t.Fatalf("time to live of %x: %v", id, err)
	}
	return resp.TTL == -1
}

// waitDeleted watches qp from revision rev until every key in keys is
// deleted, or until by, and returns when each delete arrived.
func waitDeleted(t *testing.T, cli *clientv3.Client, qp string, keys []string, rev int64, by time.Time) map[string]time.Time {
	t.Helper()
	went := map[string]time.Time{}
	if len(keys) == 0 {
		return went
	}
	ctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	for wr := range cli.Watch(ctx, qp, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := wr.Err(); err != nil {
			if ctx.Err() != nil {
				break
			}
			t.Fatalf("watch %s: %v", qp, err)
		}
		for _, ev := range wr.Events {
			if k := string(ev.Kv.Key); ev.Type == clientv3.EventTypeDelete && slices.Contains(keys, k) {
				went[k] = time.Now()
			}
		}
		if len(went) == len(keys) {
			break
		}
	}
	return went
}

// liveChild is the pid of the child a candidate started last, if it still
// runs (asked of the kernel), or 0.
func liveChild(t *testing.T, c *candidate) int {
	t.Helper()
	starts := c.out.matching("ready pid=")
	if len(starts) == 0 {
		return 0
	}
	pid := readyPid(t, starts[len(starts)-1].text)
	if !proctest.Running(pid) {
		return 0
	}
	return pid
}

// exitTime reports, once, when process pid ended (through a pidfd), or
// nothing if it still runs after safety.
func exitTime(pid int) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		if gone, _ := proctest.GoneBy(pid, time.Now().Add(safety)); gone {
			ch <- time.Now()
		}
		close(ch)
	}()
	return ch
}

// waitExit waits for the time exitTime reports, and fails if the process
// outlived safety.
func waitExit(t *testing.T, what string, ch <-chan time.Time) time.Time {
	t.Helper()
	at, ok := <-ch
	if !ok {
		t.Fatalf("%s still runs after %s", what, safety)
	}
	return at
}

// isStart is a child's first line: ready, or OVERLAP when it found the
// lock of another child held.
func isStart(l string) bool { return strings.HasPrefix(l, "ready") || strings.HasPrefix(l, "OVERLAP") }

// starts is every child start (see isStart) of c after line from.
func starts(c *candidate, from int) []stamped {
	var out []stamped
	all := c.out.matching("")
	for _, l := range all[min(from, len(all)):] {
		if isStart(l.text) {
			out = append(out, l)
		}
	}
	return out
}

// nextStart waits until one of cs says, after its mark in from, that a
// child started (ready or OVERLAP), and returns the candidate and line.
func nextStart(t *testing.T, from map[*candidate]int, cs ...*candidate) (*candidate, stamped) {
	t.Helper()
	timeout := time.After(safety)
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timeout)}}
		for _, c := range cs {
			_, _, changed := c.out.snapshot()
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(changed)})
			if s := starts(c, from[c]); len(s) > 0 {
				return c, s[0]
			}
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			var names []string
			for _, c := range cs {
				names = append(names, c.name)
			}
			t.Fatalf("no child of %s started within %s", strings.Join(names, ", "), safety)
		}
	}
}

// marks is every candidate's stdout mark now.
func marks(cs ...*candidate) map[*candidate]int {
	m := map[*candidate]int{}
	for _, c := range cs {
		m[c] = c.out.mark()
	}
	return m
}

// overlapsSince fails the test for every child of cs that found the
// probe's lock held (said OVERLAP after its mark in from): it started while
// old ran, which ended at gone. It says how many did.
func overlapsSince(t *testing.T, gone, since time.Time, sinceWhat, old string, from map[*candidate]int, cs ...*candidate) int {
	t.Helper()
	n := 0
	for _, c := range cs {
		for _, s := range starts(c, from[c]) {
			if strings.HasPrefix(s.text, "OVERLAP") {
				n++
				t.Errorf("%s's child started %s after %s, beside %s, which ended %s after %s: %q",
					c.name, s.at.Sub(since).Round(time.Millisecond), sinceWhat, old, gone.Sub(since).Round(time.Millisecond), sinceWhat, s.text)
			}
		}
	}
	return n
}

// sweepRounds runs both kinds of round of sweepRound, each on an etcd of
// its own: -sweep.rounds with the leases revoked by hand, each of which
// must end the leading term while its child runs; then rounds with the
// raft leader member frozen, until the sweep hit in -sweep.hits of them or
// -sweep.freezes were run (skipped, and said so, if it never hit). It
// stops a kind at its first round that fails.
func sweepRounds(t *testing.T, election string, fresh func(*env) *candidate, ownEnd bool) {
	t.Run("revoked", func(t *testing.T) {
		for r := 1; r <= *sweepRoundsFlag; r++ {
			if !t.Run(fmt.Sprintf("round%02d", r), func(t *testing.T) {
				if !sweepRound(t, election, fresh, ownEnd, false) {
					t.Error("the revokes did not end the leading term while its child ran and leave the queue empty")
				}
			}) {
				t.Fatalf("round %d failed", r)
			}
		}
	})
	t.Run("frozen", func(t *testing.T) {
		hits, r := 0, 0
		for r < *sweepFreezesFlag && hits < *sweepHitsFlag {
			r++
			hit := false
			if !t.Run(fmt.Sprintf("round%02d", r), func(t *testing.T) { hit = sweepRound(t, election, fresh, ownEnd, true) }) {
				t.Fatalf("round %d failed (the sweep hit in %d of %d rounds)", r, hits+btoi(hit), r)
			}
			hits += btoi(hit)
		}
		if hits == 0 {
			t.Skipf("the resumed raft leader member swept in none of %d rounds: these rounds show nothing (the revoked rounds stand in for them)", r)
		}
		t.Logf("the sweep hit in %d of %d rounds", hits, r)
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sweepRound: on a 3-member etcd, c1 leads and c2 waits, both at sweepTTL
// (sweptFlags) with every member's endpoint and a child that ignores
// SIGTERM (so a swept child outlives its supervisor's stop by
// --kill-timeout). Then the sweep, of one of two kinds:
//
//   - frozen: the raft leader member is frozen for sweepFreeze and thawed,
//     and may sweep as it resumes. At this TTL etcd's own election
//     outlasts the leader's outage tolerance, so c1 usually loses its term
//     during the freeze (and leaves) and c2 leads at the thaw; the sweep
//     takes whichever term leads then.
//   - by hand: what such a sweep does, done for certain: the raft
//     leadership moves to another member, then the leases of the terms
//     queued are revoked at once, as the resumed member sends its revokes.
//
// As soon as the terms granted before the fault are deleted, a fresh
// candidate (fresh) starts in the same election. No child may start beside
// the swept leader's. ownEnd says that the fresh candidate ends by itself
// (a --once run), so the round waits for its end rather than stopping it.
// The round says whether the sweep hit: it ended the leading term while
// its child ran and left no term queued, so that the fresh candidate finds
// none ahead.
func sweepRound(t *testing.T, election string, fresh func(*env) *candidate, ownEnd, frozen bool) (hit bool) {
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	e := newEnv(t, cluster.Endpoints())
	cli := cluster.Client(t)
	qp := e.prefix + election + "/"
	c1 := e.start("c1", sweptFlags(election), e.probe("-ignore-term"))
	c1.out.waitFor(t, "c1", "ready", 0)
	c2 := e.start("c2", sweptFlags(election), e.probe("-ignore-term"))
	queuedLease(t, cli, qp, "c2")
	cands := map[string]*candidate{"c1": c1, "c2": c2}
	_, preRev := queueKeys(t, cli, qp)

	// The fault, up to the moment the sweep may come (strike). Reads
	// during and after a freeze, and the watch of the sweep, go to the two
	// members not frozen.
	var queued []*mvccpb.KeyValue
	var rev int64
	var strike func()
	var what string
	raft := cluster.RaftLeader(t)
	if frozen {
		var liveEps []string
		for i, ep := range cluster.Endpoints() {
			if i != raft {
				liveEps = append(liveEps, ep)
			}
		}
		cli = etcdtest.NewClient(t, liveEps...)
		m := cluster.Member(raft)
		m.Freeze(t)
		began := time.Now()
		// The duration is the fault, not a wait for an event.
		time.Sleep(time.Until(began.Add(sweepFreeze)))
		queued, rev = queueKeys(t, cli, qp)
		strike = func() { m.Thaw(t) }
		what = fmt.Sprintf("raft leader member %d frozen %s", raft, time.Since(began).Round(time.Millisecond))
	} else {
		cluster.MoveLeader(t, (raft+1)%3)
		queued, rev = queueKeys(t, cli, qp)
		strike = func() {
			var wg sync.WaitGroup
			for _, kv := range queued {
				wg.Go(func() {
					if _, err := cli.Revoke(ctxT(t), clientv3.LeaseID(kv.Lease)); err != nil {
						t.Errorf("revoke %x: %v", kv.Lease, err)
					}
				})
			}
			wg.Wait()
		}
		what = fmt.Sprintf("raft leadership moved from member %d, then %d leases revoked at once", raft, len(queued))
	}

	// The terms queued now that were granted before the fault are the
	// sweep's; the oldest leads. (A lease of TTL 2s that lives this long
	// into a freeze was renewed by the new raft leader.)
	var targets []string
	for _, kv := range queued {
		if kv.CreateRevision <= preRev {
			targets = append(targets, string(kv.Key))
		}
	}
	var leader *candidate
	var leaderKey string
	var leaderLease clientv3.LeaseID
	oldPid := 0
	if len(queued) > 0 {
		leaderKey, leaderLease = string(queued[0].Key), clientv3.LeaseID(queued[0].Lease)
		if leader = cands[string(queued[0].Value)]; leader != nil {
			oldPid = liveChild(t, leader)
		}
	}
	from := marks(c1, c2)
	struck := time.Now()
	strike()
	// A resumed member that sweeps does so at once: within tens of ms.
	went := waitDeleted(t, cli, qp, targets, rev+1, struck.Add(sweepTTL))
	oldRan := oldPid != 0 && proctest.Running(oldPid)
	_, swept := went[leaderKey]
	if !swept || !oldRan {
		t.Logf("no sweep of a running child: %s; queued then %d, %d of them from before, %d deleted in the %s after; leader %s's child running: %v",
			what, len(queued), len(targets), len(went), sweepTTL, leaderKey, oldRan)
		stopAll(t, e, c1, c2)
		return false
	}

	// A fresh candidate, at once.
	c3 := fresh(e)
	launched := time.Now()
	from[c3] = 0

	sweptAt := went[leaderKey]
	if !leaseGone(t, cli, leaderLease) {
		t.Errorf("the leading term's key %s was deleted, but its lease lives", leaderKey)
	}
	hit = len(went) == len(queued)
	t.Logf("%s; the sweep deleted %d of the %d terms queued, %s after; the leader was %s, its child %d; %s launched %s after the sweep",
		what, len(went), len(queued), sweptAt.Sub(struck).Round(time.Millisecond), leader.name, oldPid,
		c3.name, launched.Sub(sweptAt).Round(time.Millisecond))

	gone := waitExit(t, "the swept leader's child", exitTime(oldPid))
	t.Logf("the swept leader's child ended %s after the sweep", gone.Sub(sweptAt).Round(time.Millisecond))
	overlapsSince(t, gone, sweptAt, "the sweep", "the swept leader's child", from, c1, c2, c3)
	// Some child runs again after the sweep.
	c, s := nextStart(t, from, c1, c2, c3)
	t.Logf("first child after the sweep: %s's, %s after the sweep: %q", c.name, s.at.Sub(sweptAt).Round(time.Millisecond), s.text)
	if ownEnd {
		c3.exit(t)
	}
	stopAll(t, e, c1, c2, c3)
	return hit
}

// A fresh etcdlead, campaigning just after a resumed raft leader member's
// sweep, must not start beside the swept leader's child (sweepRound): c1
// leads, c2 waits (--ttl=2s --once, every member's endpoint, children that
// ignore SIGTERM); the sweep ends their terms; once it has deleted them,
// c3, a new process in the same election, campaigns. Each round on a new
// 3-member etcd: 10 with the sweep done by hand, then up to 4 with the
// raft leader member frozen for 5 x TTL, until one sweeps (sweepRounds).
func TestSweepFreshCandidate(t *testing.T) {
	skipIfShort(t)
	const election = "swept"
	sweepRounds(t, election, func(e *env) *candidate {
		return e.start("c3", sweepFlags(election), e.probe())
	}, false)
}

// The same with the README's cron line as the fresh candidate: fired
// just after the sweep, its job must not run beside the swept leader's
// child. c1 and c2 run in the line's election; the line runs as cron runs
// it (cronFiring), its job the probe.
func TestSweepCronLine(t *testing.T) {
	skipIfShort(t)
	var election string
	for _, f := range readmeCronFlags(t) {
		if v, ok := strings.CutPrefix(f, "--election="); ok {
			election = v
		}
	}
	if election == "" {
		t.Fatal("README.md's cron line names no --election")
	}
	sweepRounds(t, election, func(e *env) *candidate {
		command := readmeCronCommand(e.t, strings.Join(e.endpoints, ","), e.probe("-exit", "0"))
		return e.cronFiring("c3", command)
	}, true)
}

// A waiter whose watch breaks at the leader's early end: c1 leads (--ttl=6s,
// a child that ignores SIGTERM), c2 waits (--ttl=2s) through proxies; the
// raft leadership moves, so etcd's raft term passes c1's grant. c1's
// supervisor is frozen, so only its keeper's fence stops its child. Then,
// as a sweep would, c1's lease is revoked while c2 hears nothing (frozen,
// its links dropping every byte), etcd is compacted past the revoke and
// c2's connections are reset: c2 resumes its watches from a compacted
// revision and can only read that c1's keys are gone, not how they went.
// c2 must not start its child while c1's runs.
func TestSweepWatchBroken(t *testing.T) {
	skipIfShort(t)
	const election = "compacted"
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	e := newEnv(t, cluster.Endpoints())
	cli := cluster.Client(t)
	qp := e.prefix + election + "/"
	c1 := e.start("c1", []string{"--ttl=6s", "--log-level=debug", "--election=" + election}, e.probe("-ignore-term"))
	c1.out.waitFor(t, "c1", "ready", 0)
	var proxies []*faultproxy.Proxy
	var addrs []string
	for _, ep := range cluster.Endpoints() {
		p := newProxy(t, ep)
		proxies = append(proxies, p)
		addrs = append(addrs, p.Addr())
	}
	c2 := e.via(addrs...).start("c2", sweepFlags(election), e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	cluster.MoveLeader(t, (cluster.RaftLeader(t)+1)%3)
	l1 := queuedLease(t, cli, qp, "c1")
	old := liveChild(t, c1)
	if old == 0 {
		t.Fatal("c1's child does not run")
	}
	from := marks(c2)

	c1.signal(t, syscall.SIGSTOP)
	frozen := time.Now()
	c2.signal(t, syscall.SIGSTOP)
	for _, p := range proxies {
		p.Blackhole()
	}
	rr, err := cli.Revoke(ctxT(t), l1)
	if err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	pr, err := cli.Put(ctxT(t), e.prefix+"filler", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctxT(t), pr.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	for _, p := range proxies {
		p.Pass() // resets every connection: the revoke's deletes never reached c2
	}
	c2.signal(t, syscall.SIGCONT)
	goneCh := exitTime(old)
	if !leaseGone(t, cli, l1) {
		t.Fatal("c1's lease lives after its revoke")
	}
	t.Logf("c1's lease revoked at revision %d, %s after c1 froze; etcd compacted to %d", rr.Header.Revision,
		revoked.Sub(frozen).Round(time.Millisecond), pr.Header.Revision)

	gone := waitExit(t, "c1's child", goneCh)
	t.Logf("c1's child (pid %d) ended %s after the revoke", old, gone.Sub(revoked).Round(time.Millisecond))
	overlapsSince(t, gone, revoked, "the revoke", "c1's child", from, c2)
	c, s := nextStart(t, from, c2)
	t.Logf("%s's child started %s after the revoke: %q", c.name, s.at.Sub(revoked).Round(time.Millisecond), s.text)
	if l, ok := c2.log.find("required revision has been compacted"); ok {
		t.Logf("c2 met the compaction: %s", l)
	}
	c1.signal(t, syscall.SIGCONT)
	stopAll(t, e, c1, c2)
}

// Two terms ended early at once: A leads (--ttl=6s, its supervisor frozen,
// so its keeper's fence alone ends its child, up to 6s after its last
// renewal); W waits behind A and B behind W, both at --ttl=2s. The raft
// leadership moves, then W's lease and A's are revoked, A's just after,
// as a sweep revokes them, while B's supervisor is frozen for a moment.
// B sees only W's term go; it must not start before A's child is gone,
// nor may W, campaigning again.
func TestSweepTwoTerms(t *testing.T) {
	skipIfShort(t)
	const election = "two"
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	e := newEnv(t, cluster.Endpoints())
	cli := cluster.Client(t)
	qp := e.prefix + election + "/"
	a := e.start("A", []string{"--ttl=6s", "--log-level=debug", "--election=" + election}, e.probe("-ignore-term"))
	a.out.waitFor(t, "A", "ready", 0)
	w := e.start("W", sweepFlags(election), e.probe())
	w.log.waitFor(t, "W", "waiting on predecessor", 0)
	b := e.start("B", sweepFlags(election), e.probe())
	b.log.waitFor(t, "B", "waiting on predecessor", 0)
	cluster.MoveLeader(t, (cluster.RaftLeader(t)+1)%3)
	la := queuedLease(t, cli, qp, "A")
	lw := queuedLease(t, cli, qp, "W")
	old := liveChild(t, a)
	if old == 0 {
		t.Fatal("A's child does not run")
	}
	from := marks(w, b)

	a.signal(t, syscall.SIGSTOP)
	frozen := time.Now()
	// B hears of W's end only once A's lease is gone too, as it does when
	// a sweep sends both revokes at once: frozen for the two revokes, it
	// then reads W's delete from its watch, already sent, and reads again.
	b.signal(t, syscall.SIGSTOP)
	for _, l := range []clientv3.LeaseID{lw, la} {
		if _, err := cli.Revoke(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
	}
	revoked := time.Now()
	b.signal(t, syscall.SIGCONT)
	goneCh := exitTime(old)
	for _, l := range []clientv3.LeaseID{lw, la} {
		if !leaseGone(t, cli, l) {
			t.Fatalf("lease %x lives after its revoke", l)
		}
	}
	t.Logf("W's and A's leases revoked %s after A froze", revoked.Sub(frozen).Round(time.Millisecond))

	gone := waitExit(t, "A's child", goneCh)
	t.Logf("A's child (pid %d) ended %s after the revokes", old, gone.Sub(revoked).Round(time.Millisecond))
	overlapsSince(t, gone, revoked, "the revokes", "A's child", from, w, b)
	c, s := nextStart(t, from, w, b)
	t.Logf("the first child after the revokes: %s's, %s after them: %q", c.name, s.at.Sub(revoked).Round(time.Millisecond), s.text)
	a.signal(t, syscall.SIGCONT)
	stopAll(t, e, a, w, b)
}
