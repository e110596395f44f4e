package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdtest"
	"github.com/etcdlead/etcdlead/internal/faultproxy"
)

// The chaos soak: scripts/chaos runs it for as long as asked; the suite runs
// a short one. A hand-revoked lease is left out on purpose: that case is
// bounded, not zero (README), so it would be an expected overlap.
var (
	chaosDuration   = flag.Duration("chaos.duration", 15*time.Second, "how long TestChaos injects faults")
	chaosSeed       = flag.Uint64("chaos.seed", 0, "seed of TestChaos, to replay a run (0: from the clock)")
	chaosCandidates = flag.Int("chaos.candidates", 4, "supervisors in TestChaos")
)

type chaosCand struct {
	name    string
	proxies []*faultproxy.Proxy // one per etcd member
	cur     *candidate
	all     []*candidate // every process this candidate ran, in order
}

type chaos struct {
	t       *testing.T
	layout  campaign.Layout
	nested  *candidate // a candidate of another election nested under this one's prefix
	rng     *rand.Rand
	cluster *etcdtest.Cluster
	cli     *clientv3.Client
	e       *env
	cands   []*chaosCand
	faults  map[string]int
	history []faultAt // every fault, in order, for the cause of a gap
	orphans []string
}

type faultAt struct {
	kind string
	at   time.Time
}

func TestChaos(t *testing.T) {
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos: seed %d, %d candidates, %s (replay: scripts/chaos %s %d)", seed, *chaosCandidates, *chaosDuration, *chaosDuration, seed)
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	c := &chaos{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), cluster: cluster, cli: cluster.Client(t),
		e: newEnv(t, nil), faults: map[string]int{}}
	layout, err := campaign.NewLayout(c.e.prefix, "chaos")
	if err != nil {
		t.Fatal(err)
	}
	c.layout = layout
	for i := 1; i <= *chaosCandidates; i++ {
		cc := &chaosCand{name: "c" + strconv.Itoa(i)}
		for _, ep := range cluster.Endpoints() {
			cc.proxies = append(cc.proxies, newProxy(t, ep))
		}
		c.cands = append(c.cands, cc)
		c.start(cc)
	}
	start := time.Now()
	for time.Since(start) < *chaosDuration {
		c.inject()
		c.pause(100*time.Millisecond, 1500*time.Millisecond)
	}
	c.history = append(c.history, faultAt{"end of faults", time.Now()})
	c.waitForLeader()
	c.finish()
}

func (c *chaos) start(cc *chaosCand) {
	var addrs []string
	for _, p := range cc.proxies {
		addrs = append(addrs, p.Addr())
	}
	cc.cur = c.e.via(addrs...).start(cc.name, []string{"--ttl=2s", "--election=chaos", "--dial-timeout=1s"}, c.e.probe())
	cc.all = append(cc.all, cc.cur)
}

// pause holds a fault (or the calm between two) for a random time: the
// duration is the experiment, not a wait for an event.
func (c *chaos) pause(lo, hi time.Duration) {
	time.Sleep(lo + time.Duration(c.rng.Int64N(int64(hi-lo))))
}

func (c *chaos) record(kind string) {
	c.faults[kind]++
	c.history = append(c.history, faultAt{kind, time.Now()})
}

func (c *chaos) inject() {
	cc := c.cands[c.rng.IntN(len(c.cands))]
	switch k := c.rng.IntN(11); k {
	case 0:
		c.record("partition")
		for _, p := range cc.proxies {
			p.Blackhole()
		}
		c.pause(300*time.Millisecond, 4*time.Second)
		for _, p := range cc.proxies {
			p.Pass()
		}
	case 1:
		c.record("freeze")
		cc.cur.signal(c.t, syscall.SIGSTOP)
		c.pause(300*time.Millisecond, 6*time.Second)
		cc.cur.signal(c.t, syscall.SIGCONT)
	case 2:
		c.record("kill -9")
		child := c.runningChild(cc.cur)
		cc.cur.signal(c.t, syscall.SIGKILL)
		cc.cur.exit(c.t)
		if child != 0 && !goneWithin(child, 10*time.Second) {
			c.orphans = append(c.orphans, fmt.Sprintf("pid %d of %s after kill -9", child, cc.name))
		}
		c.start(cc)
	case 3:
		c.record("graceful stop")
		cc.cur.signal(c.t, syscall.SIGTERM)
		cc.cur.exit(c.t)
		c.start(cc)
	case 4:
		c.record("delete leader key")
		c.deleteLeaderKey()
	case 5:
		c.record("kill etcd raft leader")
		m := c.cluster.Member(c.cluster.RaftLeader(c.t))
		m.Kill(c.t)
		c.pause(500*time.Millisecond, 3*time.Second)
		m.Restart(c.t)
	case 6:
		c.record("compact + reset")
		if resp, err := c.cli.Put(ctxT(c.t), "chaos/filler", "x"); err == nil {
			if _, err := c.cli.Compact(ctxT(c.t), resp.Header.Revision); err != nil {
				c.t.Logf("chaos: compact: %v", err)
			}
		}
		fallthrough
	case 7:
		if k == 7 {
			c.record("connection reset")
		}
		for _, p := range cc.proxies {
			p.Reset()
		}
		for _, p := range cc.proxies {
			p.Pass()
		}
	case 8:
		// A newcomer right after the delete finds no queue key ahead, only
		// the old term's sentinel.
		c.record("delete leader key + newcomer")
		cc.cur.signal(c.t, syscall.SIGTERM)
		cc.cur.exit(c.t)
		c.deleteLeaderKey()
		c.start(cc)
	case 9:
		c.record("foreign keys")
		c.foreignKeys()
	case 10:
		c.record("nested election")
		c.nestedElection()
	}
	// A candidate that ended without being told to is a finding.
	for _, x := range c.cands {
		if !x.cur.running() {
			c.t.Errorf("chaos: %s exited on its own with %d", x.name, x.cur.code)
			c.start(x)
		}
	}
}

func (c *chaos) deleteLeaderKey() {
	el, _, err := campaign.ReadElection(ctxT(c.t), c.cli, c.layout)
	if err != nil || el.Leader() == nil {
		return
	}
	if _, err := c.cli.Delete(ctxT(c.t), string(el.Leader().Key)); err != nil {
		c.t.Logf("chaos: delete %s: %v", el.Leader().Key, err)
	}
}

// foreignKeys puts keys that are no candidate's where candidates are: one
// put twice (the old barrier mark), one with a hex name and no lease, one
// under a live lease that is not the one it names; and deletes them after
// a while. None may vouch for, hide or block a term.
func (c *chaos) foreignKeys() {
	ctx := ctxT(c.t)
	lease, err := c.cli.Grant(ctx, 30)
	if err != nil {
		c.t.Logf("chaos: grant: %v", err)
		return
	}
	keys := []string{c.layout.QueuePrefix() + "zzz", c.layout.QueuePrefix() + "694d8f1c2a3b9e05",
		c.layout.QueuePrefix() + "1", c.layout.SentinelPrefix() + "2"}
	for i, k := range keys {
		var opts []clientv3.OpOption
		if i >= 2 {
			opts = append(opts, clientv3.WithLease(lease.ID))
		}
		for range 2 {
			if _, err := c.cli.Put(ctx, k, "foreign", opts...); err != nil {
				c.t.Logf("chaos: put %s: %v", k, err)
			}
		}
	}
	c.pause(300*time.Millisecond, 3*time.Second)
	for _, k := range keys {
		if _, err := c.cli.Delete(ctx, k); err != nil {
			c.t.Logf("chaos: delete %s: %v", k, err)
		}
	}
	if _, err := c.cli.Revoke(ctx, lease.ID); err != nil {
		c.t.Logf("chaos: revoke: %v", err)
	}
}

// nestedElection starts, or stops, a candidate of election "inner" whose
// prefix lies inside this election's queue: another election, which may
// run its child beside this one's (so it has a lock of its own), and whose
// keys must neither block nor stand for a term of this one.
func (c *chaos) nestedElection() {
	if c.nested != nil && c.nested.running() {
		c.nested.signal(c.t, syscall.SIGTERM)
		c.nested.exit(c.t)
		c.nested = nil
		return
	}
	inner := *c.e
	inner.prefix = c.layout.QueuePrefix()
	inner.lock += ".inner"
	inner.journal += ".inner"
	c.nested = inner.start("nested", []string{"--ttl=2s", "--election=inner"}, inner.probe())
}

// runningChild is the pid of the probe a candidate process runs, or 0.
func (c *chaos) runningChild(cand *candidate) int {
	starts := cand.out.matching("ready pid=")
	if len(starts) <= len(cand.log.matching("child exited")) {
		return 0
	}
	return readyPid(c.t, starts[len(starts)-1].text)
}

func goneWithin(pid int, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(20 * time.Millisecond)
		}
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func (c *chaos) waitForLeader() {
	deadline := time.After(safety)
	for {
		for _, cc := range c.cands {
			if c.runningChild(cc.cur) != 0 {
				return
			}
		}
		select {
		case <-deadline:
			c.t.Errorf("chaos: no leader within %s after the last fault", safety)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// finish stops everything, then checks the oracle and prints the summary.
func (c *chaos) finish() {
	var procs []*candidate
	for _, cc := range c.cands {
		procs = append(procs, cc.all...)
	}
	if c.nested != nil && c.nested.running() {
		c.nested.signal(c.t, syscall.SIGTERM)
		c.nested.exit(c.t)
	}
	for _, p := range procs {
		if p.running() {
			p.signal(c.t, syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		p.exit(c.t)
	}
	var starts []stamped
	for _, p := range procs {
		for _, r := range p.out.matching("ready pid=") {
			starts = append(starts, r)
			if pid := readyPid(c.t, r.text); syscall.Kill(pid, 0) == nil && !goneWithin(pid, 10*time.Second) {
				c.orphans = append(c.orphans, fmt.Sprintf("pid %d alive after every supervisor ended", pid))
			}
		}
	}
	overlaps := 0
	for _, l := range c.e.journalLines(c.t) { // reports each OVERLAP as an error
		if strings.HasPrefix(l, "OVERLAP") {
			overlaps++
		}
	}
	gap, cause := c.longestGap(procs)
	kinds := make([]string, 0, len(c.faults))
	for k := range c.faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	fmt.Fprintf(&b, "chaos summary\n")
	for _, k := range kinds {
		fmt.Fprintf(&b, "  faults  %-30s %d\n", k, c.faults[k])
	}
	fmt.Fprintf(&b, "  leader changes                         %d\n", len(starts))
	fmt.Fprintf(&b, "  overlaps                               %d\n", overlaps)
	fmt.Fprintf(&b, "  orphans                                %d\n", len(c.orphans))
	fmt.Fprintf(&b, "  longest time without a leader          %s (after: %s)\n", gap.Round(time.Millisecond), cause)
	c.t.Log(b.String())
	for _, o := range c.orphans {
		c.t.Errorf("chaos: orphan: %s", o)
	}
}

// longestGap finds the longest stretch with no child running, from the
// arrival times of "ready" and "child exited" lines, and names the fault
// injected last before it began.
func (c *chaos) longestGap(procs []*candidate) (time.Duration, string) {
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, p := range procs {
		for _, r := range p.out.matching("ready pid=") {
			evs = append(evs, ev{r.at, +1})
		}
		ends := p.log.matching("child exited")
		ends = append(ends, p.log.matching("supervisor gone; stopping the child")...)
		for _, x := range ends {
			evs = append(evs, ev{x.at, -1})
		}
	}
	slices.SortFunc(evs, func(a, b ev) int { return a.at.Compare(b.at) })
	var longest time.Duration
	var cause string
	running := 0
	var since time.Time
	for _, x := range evs {
		running += x.delta
		switch {
		case running <= 0 && since.IsZero():
			since = x.at
		case running > 0 && !since.IsZero():
			if d := x.at.Sub(since); d > longest {
				longest, cause = d, c.faultBefore(since)
			}
			since = time.Time{}
		}
	}
	return longest, cause
}

func (c *chaos) faultBefore(at time.Time) string {
	cause := "start"
	for _, f := range c.history {
		if !f.at.After(at) {
			cause = f.kind
		}
	}
	return cause
}
