package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"
)

// byTool holds one figure's samples for each tool, by tool key.
type byTool map[string]sample

// order gives the tools for round i: A B, then B A, and so on, so that
// neither tool always runs right after the other one's teardown.
func (b *bench) order(i int) []*tool {
	if i%2 == 0 {
		return []*tool{b.tools[0], b.tools[1]}
	}
	return []*tool{b.tools[1], b.tools[0]}
}

// ---- time to first child ----------------------------------------------

// firstChild times an uncontended start: the exec of the supervisor to the
// child's first instruction. Every run has an election of its own. Run -1
// warms the page cache and is not counted.
func (b *bench) firstChild(ctx context.Context, n int) (byTool, map[string][]float64, error) {
	res := byTool{}
	commits := map[string][]float64{}
	for i := -1; i < n; i++ {
		for _, t := range b.order(i + 1) {
			group := "ttfc-" + t.Key
			id := fmt.Sprintf("%s/%d", group, i+1)
			before, err := scrape(ctx, b.metricsURL)
			if err != nil {
				return nil, nil, err
			}
			t0, c, k, err := b.startOne(t, fmt.Sprintf("ttfc-%s-%d", t.Key, i+1), group, id, spawnOpts{})
			if err != nil {
				return nil, nil, err
			}
			after, err := scrape(ctx, b.metricsURL)
			if err != nil {
				return nil, nil, err
			}
			if i >= 0 {
				res[t.Key] = append(res[t.Key], time.Duration(k.Start-t0))
				commits[t.Key] = append(commits[t.Key], delta{before, after}.sum("etcd_server_proposals_committed_total"))
			}
			if err := b.stopStart(ctx, c, k); err != nil {
				return nil, nil, err
			}
		}
	}
	return res, commits, nil
}

// startOne execs one uncontended candidate of t and waits for its child's
// first instruction; t0 is the bench's clock just before the exec.
func (b *bench) startOne(t *tool, election, group, id string, o spawnOpts) (int64, *cand, *kid, error) {
	defer hush()()
	t0 := mono()
	c, err := b.spawnWith(t, election, 10, id, o)
	if err != nil {
		return 0, nil, nil, err
	}
	k, err := b.hub.NextStart(group, 30*time.Second)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	return t0, c, k, nil
}

// stopStart ends a start's child and candidate, and lets the machine settle.
func (b *bench) stopStart(ctx context.Context, c *cand, k *kid) error {
	k.Exit()
	if err := c.Wait(15 * time.Second); err != nil {
		return err
	}
	return pause(ctx, 30*time.Millisecond)
}

// firstChildSteps is the traced pass of the first child: n uncontended
// etcdlead starts with ETCDLEAD_TRACE, apart from the timed ones so that no
// mark's cost enters them.
func (b *bench) firstChildSteps(ctx context.Context, n int) (*stepTable, bool, error) {
	var t *tool
	for _, x := range b.tools {
		if x.Key == lead {
			t = x
		}
	}
	if t == nil || n <= 0 {
		return nil, false, nil
	}
	file := filepath.Join(b.dir, "trace-ttfc.log")
	var rounds []tracedRound
	for i := range n {
		group := "ttfc-steps"
		id := fmt.Sprintf("%s/%d", group, i+1)
		t0, c, k, err := b.startOne(t, fmt.Sprintf("ttfc-steps-%d", i+1), group, id, spawnOpts{env: []string{"ETCDLEAD_TRACE=" + file}, bin: b.bins.traced})
		if err != nil {
			return nil, false, err
		}
		rounds = append(rounds, tracedRound{start: t0, end: k.Start, pids: map[string]int{"sup": c.Pid(), "keeper": k.PPID}})
		if err := b.stopStart(ctx, c, k); err != nil {
			return nil, false, err
		}
	}
	marks, err := readMarks(file)
	if err != nil {
		return nil, false, err
	}
	tab := &stepTable{Title: "etcdlead", Unit: "traced starts", rows: firstChildRows()}
	tab.fill(rounds, marks)
	return tab, len(marks) > 0, nil
}

// The rows of firstChildRows that others count from.
const (
	campaignBegins = 2
	keeperStarted  = 3
	startMsg       = 7
)

func firstChildRows() []stepRow {
	return []stepRow{
		{Name: "the bench execs etcdlead", Who: "bench"},
		{Name: "its run begins", Who: "supervisor", role: "sup", event: "run begins", Unsplit: "the exec, the Go runtime's start, package initialisation, the command line's parsing and check by urfave/cli, signals caught, the logger"},
		{Name: "its campaign begins", Who: "supervisor", role: "sup", event: "campaign begins", Unsplit: "the etcd client set up (it dials from then on), the status server, the containment chosen, a keeper's fork begun"},
		{Name: "a keeper forked, beside the campaign", Who: "supervisor", role: "sup", event: "standby keeper started", From: []int{campaignBegins}, OffPath: true,
			Unsplit: "the fork, on a goroutine of its own; the keeper's own start goes on beside"},
		{Name: "lease granted", Who: "supervisor", role: "sup", event: "campaigning", From: []int{campaignBegins}, Unsplit: "the dial's end (TCP, HTTP/2), a read of etcd's raft term, the LeaseGrant, a commit"},
		{Name: "campaign transaction answered", Who: "supervisor", role: "sup", event: "enqueued", Unsplit: "a commit"},
		{Name: "elected", Who: "supervisor", role: "sup", event: "elected"},
		{Name: "it writes the start message to its keeper", Who: "supervisor", role: "sup", event: "sending start to keeper"},
		{Name: "the keeper waits for it", Who: "keeper", role: "keeper", event: "keeper ready", From: []int{keeperStarted}, OffPath: true,
			Unsplit: "the keeper's exec, its runtime's start, its signals caught; off the path unless later than the row above"},
		{Name: "the keeper reads it", Who: "keeper", role: "keeper", event: "start received", From: []int{startMsg, startMsg + 1}},
		{Name: "fork and exec of the child done", Who: "keeper", role: "keeper", event: "child forked"},
		{Name: "the child's first instruction", Who: "child", Unsplit: "the child's own runtime start"},
	}
}

// hush collects the bench's garbage now and holds its collector off until
// the returned func: a window it times must not share the machine's cores
// with its own GC workers, which would weigh most on the tool that runs
// more processes at once.
func hush() (resume func()) {
	runtime.GC()
	gc := debug.SetGCPercent(-1)
	return func() { debug.SetGCPercent(gc) }
}

func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// ---- pools: one election with a leader and waiting candidates -------------

type pool struct {
	b        *bench
	t        *tool
	election string
	group    string
	ttl      int
	size     int
	seq      int
	cands    map[string]*cand
	leader   *kid
	// opts, when set, gives each new candidate its spawn options (a
	// traced pass).
	opts func(id string) (spawnOpts, error)
}

// newPool starts size candidates: the first becomes leader, the others queue
// behind it in order.
func (b *bench) newPool(ctx context.Context, t *tool, name string, ttl, size int) (*pool, error) {
	return b.newPoolWith(ctx, t, name, ttl, size, nil)
}

func (b *bench) newPoolWith(ctx context.Context, t *tool, name string, ttl, size int, opts func(string) (spawnOpts, error)) (*pool, error) {
	p := &pool{b: b, t: t, election: name + "-" + t.Key, group: name + "-" + t.Key, ttl: ttl, size: size, cands: map[string]*cand{}, opts: opts}
	if _, err := p.add(); err != nil {
		return nil, err
	}
	k, err := b.hub.NextStart(p.group, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	p.leader = k
	for len(p.cands) < size {
		if _, err := p.add(); err != nil {
			return nil, err
		}
		if err := b.waitCount(ctx, t.Prefix(p.election), int64(len(p.cands)), 30*time.Second); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
	}
	return p, nil
}

func (p *pool) add() (*cand, error) {
	p.seq++
	id := fmt.Sprintf("%s/%d", p.group, p.seq)
	var o spawnOpts
	if p.opts != nil {
		var err error
		if o, err = p.opts(id); err != nil {
			return nil, err
		}
	}
	c, err := p.b.spawnWith(p.t, p.election, p.ttl, id, o)
	if err != nil {
		return nil, err
	}
	p.cands[id] = c
	return c, nil
}

// refill replaces the candidates that ended, and waits until all of them
// hold a key.
func (p *pool) refill(ctx context.Context) error {
	for id, c := range p.cands {
		if c.Exited() {
			delete(p.cands, id)
		}
	}
	for len(p.cands) < p.size {
		if _, err := p.add(); err != nil {
			return err
		}
	}
	return p.b.waitCount(ctx, p.t.Prefix(p.election), int64(p.size), 30*time.Second)
}

// close stops the pool: the leader's child is told to exit, the waiters get
// SIGTERM (both tools then remove their keys), and stragglers are killed.
func (p *pool) close() {
	if p.leader != nil && p.leader.Alive() {
		p.leader.Exit()
	}
	for _, c := range p.cands {
		c.Signal(15)
	}
	for _, c := range p.cands {
		if c.Wait(10*time.Second) != nil {
			c.Kill()
		}
	}
	p.b.hub.Drain(p.group)
}

// ---- graceful handoff ---------------------------------------------------

type handoffResult struct {
	gap     byTool
	standby map[string][]bool               // the next leader's keeper was running before the handoff began
	fsync   map[string]histogram            // WAL fsyncs inside the handoff windows
	backend map[string]histogram            // backend (bbolt) commits inside them
	commits map[string][]float64            // raft proposals committed per window
	counts  map[string][]map[string]float64 // etcd's counts per window, as handoffCounts
	// cpu is the CPU the tool's processes (candidates, keepers, children)
	// used in each window, and etcdCPU etcd's; cpu is nil where the bench
	// could make no cgroup (cpuGroups).
	cpu, etcdCPU, window map[string][]time.Duration
	queue                int
}

// handoffs measures n graceful handoffs per tool, alternating A B A B: the
// leader's child exits on request, and the gap runs from its last
// instruction to the first instruction of the next leader's child. Each
// window, from the request to the next child's start, is also bracketed by
// scrapes of etcd's metrics, for the WAL fsyncs inside it.
func (b *bench) handoffs(ctx context.Context, n, size int) (*handoffResult, error) {
	res := &handoffResult{gap: byTool{}, standby: map[string][]bool{}, fsync: map[string]histogram{}, backend: map[string]histogram{}, commits: map[string][]float64{}, counts: map[string][]map[string]float64{}, queue: size}
	cg, err := newCPUGroups([]string{lead, ctl})
	if err != nil {
		b.say("no CPU figure for the handoffs: %v", err)
	} else {
		res.cpu, res.etcdCPU, res.window = map[string][]time.Duration{}, map[string][]time.Duration{}, map[string][]time.Duration{}
	}
	defer cg.close() // after the pools, below: their processes are gone by then
	pools := map[string]*pool{}
	defer func() {
		for _, p := range pools {
			p.close()
		}
	}()
	for _, t := range b.tools {
		p, err := b.newPoolWith(ctx, t, fmt.Sprintf("handoff-q%d", size), 10, size, func(string) (spawnOpts, error) {
			return spawnOpts{cgroup: cg.fd(t.Key)}, nil
		})
		if err != nil {
			return nil, err
		}
		pools[t.Key] = p
	}
	for i := 0; i < n; i++ {
		for _, t := range b.order(i) {
			p := pools[t.Key]
			if err := pause(ctx, 100*time.Millisecond); err != nil {
				return nil, err
			}
			// Which processes the candidates had started before the
			// handoff: a keeper among them that ends up as the next
			// child's parent was a standby, started ahead of need.
			sups := map[int]bool{}
			for _, c := range p.cands {
				sups[c.Pid()] = true
			}
			early := childrenOf(sups)
			before, err := scrape(ctx, b.metricsURL)
			if err != nil {
				return nil, err
			}
			cpu0, etcd0, t0 := cg.usage(t.Key), threadsCPU(b.etcd.cmd.Process.Pid), time.Now()
			old := p.leader
			resume := hush()
			old.Exit()
			next, err := b.hub.NextStart(p.group, 30*time.Second)
			wall := time.Since(t0)
			cpu1, etcd1 := cg.usage(t.Key), threadsCPU(b.etcd.cmd.Process.Pid)
			resume()
			if err != nil {
				return nil, fmt.Errorf("%s handoff %d: %w", t.Name, i, err)
			}
			if res.cpu != nil {
				res.cpu[t.Key] = append(res.cpu[t.Key], cpu1-cpu0)
				res.etcdCPU[t.Key] = append(res.etcdCPU[t.Key], etcd1-etcd0)
				res.window[t.Key] = append(res.window[t.Key], wall)
			}
			after, err := scrape(ctx, b.metricsURL)
			if err != nil {
				return nil, err
			}
			exitT, err := old.ExitTime(5 * time.Second)
			if err != nil {
				return nil, err
			}
			p.leader = next
			res.gap[t.Key] = append(res.gap[t.Key], time.Duration(next.Start-exitT))
			_, ready := early[next.PPID]
			res.standby[t.Key] = append(res.standby[t.Key], ready)
			d := delta{before, after}
			h := res.fsync[t.Key]
			h.add(d.histogram("etcd_disk_wal_fsync_duration_seconds"))
			res.fsync[t.Key] = h
			bh := res.backend[t.Key]
			bh.add(d.histogram("etcd_disk_backend_commit_duration_seconds"))
			res.backend[t.Key] = bh
			res.commits[t.Key] = append(res.commits[t.Key], d.sum("etcd_server_proposals_committed_total"))
			res.counts[t.Key] = append(res.counts[t.Key], handoffCounts(d))
			if c := p.cands[old.ID]; c != nil {
				if err := c.Wait(15 * time.Second); err != nil {
					return nil, err
				}
			}
			if err := p.refill(ctx); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// add accumulates another delta histogram with the same buckets.
func (h *histogram) add(o histogram) {
	if len(h.bounds) == 0 {
		*h = histogram{bounds: o.bounds, counts: append([]float64(nil), o.counts...), sum: o.sum, count: o.count}
		return
	}
	for i := range h.counts {
		if i < len(o.counts) {
			h.counts[i] += o.counts[i]
		}
	}
	h.sum += o.sum
	h.count += o.count
}

// ---- crash failover -----------------------------------------------------

type failoverResult struct {
	ttl      int
	took     byTool
	overlap  map[string]int    // successor started while the old child lived
	stopped  map[string]sample // kill -9 → old child gone, where it went
	orphaned map[string]int    // old child still alive 1 s after the successor started
}

// failovers kill -9s the leading supervisor n times per tool, at a random
// point of its renewal cycle, and times the next child's start from the
// kill. The old child is watched too: whether it was gone before the
// successor started is the difference between the tools.
func (b *bench) failovers(ctx context.Context, n, ttl int) (*failoverResult, error) {
	res := &failoverResult{ttl: ttl, took: byTool{}, overlap: map[string]int{}, stopped: map[string]sample{}, orphaned: map[string]int{}}
	pools := map[string]*pool{}
	defer func() {
		for _, p := range pools {
			p.close()
		}
	}()
	for _, t := range b.tools {
		p, err := b.newPool(ctx, t, "failover", ttl, 2)
		if err != nil {
			return nil, err
		}
		pools[t.Key] = p
	}
	for i := 0; i < n; i++ {
		for _, t := range b.order(i) {
			p := pools[t.Key]
			if err := pause(ctx, time.Duration(300+b.rng.IntN(1000))*time.Millisecond); err != nil {
				return nil, err
			}
			old := p.leader
			oc := p.cands[old.ID]
			resume := hush()
			t0 := mono()
			oc.Kill()
			next, err := b.hub.NextStart(p.group, time.Duration(ttl)*time.Second+30*time.Second)
			resume()
			if err != nil {
				return nil, fmt.Errorf("%s failover %d: %w", t.Name, i, err)
			}
			p.leader = next
			res.took[t.Key] = append(res.took[t.Key], time.Duration(next.Start-t0))
			if !old.Alive() {
				if g, _ := old.GoneAt(0); g > next.Start {
					res.overlap[t.Key]++
				} else {
					res.stopped[t.Key] = append(res.stopped[t.Key], time.Duration(g-t0))
				}
			} else {
				res.overlap[t.Key]++
				if _, err := old.GoneAt(time.Second); err != nil {
					res.orphaned[t.Key]++
					old.Exit() // the bench ends what etcdctl lock left behind
				}
			}
			if _, err := old.GoneAt(10 * time.Second); err != nil {
				return nil, err
			}
			if err := oc.Wait(10 * time.Second); err != nil {
				return nil, err
			}
			if err := p.refill(ctx); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// ---- process start-up ---------------------------------------------------

// startups times exec → exit of each binary doing nothing but start:
// `etcdlead --version`, `etcdctl version`, and the child without arguments.
// etcdlead pays its own start-up once more per term, for the keeper.
func (b *bench) startups(ctx context.Context, n int) (map[string]sample, error) {
	cmds := []struct {
		key  string
		argv []string
	}{
		{"etcdlead", []string{b.bins.etcdlead, "--version"}},
		{"etcdctl", []string{b.bins.etcdctl, "version"}},
		{"child", []string{b.bins.child}},
	}
	res := map[string]sample{}
	for i := -1; i < n; i++ {
		for _, c := range cmds {
			cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
			cmd.Env = b.env
			t0 := time.Now()
			err := cmd.Run()
			d := time.Since(t0)
			if c.key != "child" && err != nil {
				return nil, fmt.Errorf("%v: %w", c.argv, err)
			}
			if i >= 0 {
				res[c.key] = append(res[c.key], d)
			}
		}
	}
	return res, nil
}
