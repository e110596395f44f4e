package e2e

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

var fast = []string{"--ttl=2s", "--log-level=debug"}

// readyPid parses "ready pid=N ..." from the probe.
func readyPid(t *testing.T, line string) int {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 2 {
		t.Fatalf("not a ready line: %q", line)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(f[1], "pid="))
	if err != nil {
		t.Fatalf("not a ready line: %q", line)
	}
	return pid
}

// Three candidates: exactly one child runs, etcd's own election recipe sees
// its id as the leader, and a graceful stop of the leader hands over.
func TestThreeCandidatesOneChildThenHandover(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	var cands []*candidate
	for i := 1; i <= 3; i++ {
		c := e.start("c"+strconv.Itoa(i), fast, e.probe())
		cands = append(cands, c)
		if i == 1 {
			c.out.waitFor(t, "c1", "ready", 0)
		} else {
			c.log.waitFor(t, c.name, "waiting on predecessor", 0)
		}
	}
	for _, c := range cands[1:] {
		if _, ok := c.out.find("ready"); ok {
			t.Fatalf("%s started a child while c1 leads", c.name)
		}
	}

	// Observers using etcd's recipe see the same leader.
	sess, err := concurrency.NewSession(cluster.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	resp, err := concurrency.NewElection(sess, strings.TrimSuffix(e.prefix, "/")+"/"+"probe").Leader(ctxT(t))
	if err != nil {
		t.Fatalf("Election.Leader: %v", err)
	}
	if got := string(resp.Kvs[0].Value); got != "c1" {
		t.Fatalf("Election.Leader = %q, want c1", got)
	}

	cands[0].signal(t, syscall.SIGTERM)
	if code := cands[0].exit(t); code != 143 {
		t.Fatalf("c1 exit code %d, want the child's 143", code)
	}
	cands[1].out.waitFor(t, "c2", "ready", 0)
	if _, ok := cands[2].out.find("ready"); ok {
		t.Fatal("c3 started a child while c2 leads")
	}
	for _, c := range cands[1:] {
		c.signal(t, syscall.SIGTERM)
	}
	if code := cands[1].exit(t); code != 143 {
		t.Fatalf("c2 exit code %d, want 143", code)
	}
	if code := cands[2].exit(t); code != 143 && code != 0 {
		t.Fatalf("c3 exit code %d, want 143 (if it led) or 0 (still campaigning)", code)
	}
	e.journalLines(t)
}

func TestExitStatusPassesThrough(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	for _, code := range []int{0, 3} {
		c := e.start("exit"+strconv.Itoa(code), fast, e.probe("-exit", strconv.Itoa(code)))
		if got := c.exit(t); got != code {
			t.Errorf("child exit %d: etcdlead exited %d", code, got)
		}
	}
	c := e.start("term", fast, e.probe())
	c.out.waitFor(t, "term", "ready", 0)
	c.signal(t, syscall.SIGTERM)
	if got := c.exit(t); got != 143 {
		t.Errorf("child killed by SIGTERM: etcdlead exited %d, want 143", got)
	}
	// Every term was revoked: nothing left under the prefix.
	resp, err := cluster.Client(t).Get(ctxT(t), e.prefix, clientPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("keys left behind: %v", resp.Kvs)
	}
}

func TestForwardedSignalsReachChild(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c := e.start("hup", fast, e.probe())
	c.out.waitFor(t, "hup", "ready", 0)
	c.signal(t, syscall.SIGHUP)
	c.out.waitFor(t, "hup", "signal SIGHUP", 0)
	c.signal(t, syscall.SIGUSR1)
	c.out.waitFor(t, "hup", "signal SIGUSR1", 0)
	// Ctrl-Z must not stop the supervisor: it would stop renewing.
	c.signal(t, syscall.SIGTSTP)
	c.log.waitFor(t, "hup", "signal ignored", 0)
	c.signal(t, syscall.SIGINT)
	if got := c.exit(t); got != 130 {
		t.Errorf("exit %d after SIGINT, want 130", got)
	}
}

// The TTL is long, so the SIGKILL that ends it can only be the kill
// timeout's, not the fence's.
func TestChildIgnoringTermIsKilledAfterKillTimeout(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c := e.start("stubborn", []string{"--ttl=30s", "--kill-timeout=500ms", "--log-level=debug"}, e.probe("-ignore-term"))
	c.out.waitFor(t, "stubborn", "ready", 0)
	c.signal(t, syscall.SIGTERM)
	// The fence point is at least T - K - m - r = 30 - 0.5 - 1.5 - 1 = 27s away.
	fencePoint := time.Now().Add(27 * time.Second)
	c.out.waitFor(t, "stubborn", "signal SIGTERM", 0)
	if got := c.exit(t); got != 137 {
		t.Errorf("exit %d, want 137 (SIGKILL after --kill-timeout)", got)
	}
	if time.Now().After(fencePoint) {
		t.Errorf("the child ended after the fence point: the kill timeout was not kept")
	}
}

// kill -9 of the leading supervisor: the keeper stops the child and the
// grandchild that `sh -c` started, and the next candidate leads without
// overlap (the probe's lock would tell). The TTL is long enough that only
// the keeper's own reaction to its supervisor's death, not the fence, can
// have them gone before the fence point.
func TestKill9OfSupervisorStopsChildAndGrandchild(t *testing.T) {
	t.Parallel() // it mostly waits: for a lease to end, a freeze, a --wait
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	script := strings.Join(e.probe("-grandchild"), " ") + "; echo after"
	// T = 10s, K = 1s, m = 0.5s, r = 1s: the fence point comes at least
	// T - K - m - r = 7.5s after the kill.
	flags := []string{"--ttl=10s", "--kill-timeout=1s", "--log-level=debug", "--election=k9"}
	c1 := e.start("c1", flags, []string{"sh", "-c", script})
	gline, _ := c1.out.waitFor(t, "c1", "grandchild ", 0)
	ready, _ := c1.out.waitFor(t, "c1", "ready", 0)
	c2 := e.start("c2", flags, e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)

	c1.signal(t, syscall.SIGKILL)
	fencePoint := time.Now().Add(10*time.Second - time.Second - 500*time.Millisecond - time.Second)
	c1.exit(t)
	waitGoneBy(t, readyPid(t, ready), fencePoint)
	gpid, _ := strconv.Atoi(strings.TrimPrefix(gline, "grandchild "))
	waitGoneBy(t, gpid, fencePoint)
	c2.out.waitFor(t, "c2", "ready", 0)
	c2.signal(t, syscall.SIGTERM)
	c2.exit(t)
	e.journalLines(t)
}

func TestEtcdDownAtStartThenUp(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	m := cluster.Member(0)
	m.Stop(t)
	e := newEnv(t, cluster.Endpoints())
	c := e.start("early", append(fast, "--dial-timeout=500ms"), e.probe())
	c.log.waitFor(t, "early", "campaign failed", 0)
	m.Restart(t)
	c.out.waitFor(t, "early", "ready", 0)
	c.signal(t, syscall.SIGTERM)
	c.exit(t)
}

// A stop signal while campaigning ends etcdlead at once with 0, and its
// queued key and sentinel are revoked with its lease.
func TestStopWhileCampaigning(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c1, c2 := e.leaderAndWaiter(fast)
	c2.signal(t, syscall.SIGTERM)
	if got := c2.exit(t); got != 0 {
		t.Errorf("campaigning etcdlead exited %d on SIGTERM, want 0", got)
	}
	resp, err := cluster.Client(t).Get(ctxT(t), e.prefix, clientPrefix())
	if err != nil {
		t.Fatal(err)
	}
	_, lease := leaseOf(t, cluster.Client(t), e.prefix, "c1")
	l, err := campaign.NewLayout(e.prefix, "probe")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if clientv3.LeaseID(kv.Lease) != lease && string(kv.Key) != l.RecordKey(lease) {
			t.Errorf("want only c1's keys left, got %s (lease %x)", kv.Key, kv.Lease)
		}
	}
	if len(resp.Kvs) != 3 {
		t.Errorf("want c1's queue key, sentinel and record, got %d keys", len(resp.Kvs))
	}
	c1.signal(t, syscall.SIGTERM)
	c1.exit(t)
}

// A child running `etcdlead run` does not join its parent's election (it
// would wait for ever behind its own parent).
func TestNestedRunDoesNotInheritElection(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	nested := append([]string{etcdleadBin(), "run", "--ttl=2s", "--"}, e.probe()...)
	c := e.start("outer", fast, nested, "ETCDLEAD_ELECTION=parent", "ETCDLEAD_PREFIX="+e.prefix)
	line, _ := c.out.waitFor(t, "outer", "ready", 0)
	if !strings.HasSuffix(line, "name=probe election=") {
		t.Errorf("nested child saw %q, want its own election 'probe' and no ETCDLEAD_ELECTION", line)
	}
	c.signal(t, syscall.SIGTERM)
	c.exit(t)
}

// --wait bounds the campaign: with another leader, exit with
// --conflict-exit-code (75 by default); with etcd unreachable, 125.
func TestWaitEnds(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // it mostly waits: for a lease to end, a freeze, a --wait
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	leader := e.start("leader", fast, e.probe())
	leader.out.waitFor(t, "leader", "ready", 0)
	c := e.start("late", append(fast, "--wait=1s"), e.probe())
	if got := c.exit(t); got != 75 {
		t.Errorf("--wait with another leader: exit %d, want 75", got)
	}
	c = e.start("late2", append(fast, "--wait=1s", "--conflict-exit-code=9"), e.probe())
	if got := c.exit(t); got != 9 {
		t.Errorf("--conflict-exit-code=9: exit %d", got)
	}
	if _, ok := c.out.find("ready"); ok {
		t.Error("a child started while another led")
	}
	leader.signal(t, syscall.SIGTERM)
	leader.exit(t)

	down := newEnv(t, []string{"127.0.0.1:1"})
	c = down.start("nowhere", append(fast, "--wait=1s", "--dial-timeout=300ms"), down.probe())
	if got := c.exit(t); got != 125 {
		t.Errorf("--wait with etcd unreachable: exit %d, want 125", got)
	}
	c.log.waitFor(t, "nowhere", "unreachable", 0)
}

// --renew-interval reaches the leader's renewals, not only the timing it
// logs: at the default TTL with an interval of 4s, two renewals in 9s of
// leading (three if an answer took longer than 1s and the renewal was sent
// again), where the default interval, 1s, makes nine or ten.
func TestRenewIntervalReachesLeader(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c := e.start("c1", []string{"--ttl=15s", "--renew-interval=4s", "--log-level=trace"}, e.probe())
	c.out.waitFor(t, "c1", "ready", 0)
	from := time.Now()
	const window = 9 * time.Second
	time.Sleep(window) // the measure of a cadence, not a wait for an event
	n := 0
	for _, m := range c.log.matching("campaign: renewed") {
		if !m.at.Before(from) && m.at.Before(from.Add(window)) {
			n++
		}
	}
	if n > 3 {
		t.Errorf("%d renewals in %s at --renew-interval=4s, want at most 3", n, window)
	}
	if n < 1 {
		t.Errorf("no renewal in %s at --renew-interval=4s", window)
	}
	c.signal(t, syscall.SIGTERM)
	c.exit(t)
}
