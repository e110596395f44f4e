// Command benchmain is scripts/bench: etcdlead and etcdctl lock side by side,
// on one etcd, in one run. From the module root:
//
//	scripts/bench            # the full run (about 20 minutes on 2 cores); writes BENCHMARKS.md
//	scripts/bench -quick     # fewer samples, short idle windows; prints the report
//
// It builds etcd, etcdctl (at the version pinned in go.mod), etcdlead (this
// checkout) and a tiny child program; starts a single etcd member with its
// data on disk (fsync on, as in production) on a loopback port chosen at run
// time; and measures, alternating the tools run by run: time to first child,
// graceful handoff gap (with etcd's WAL fsync latency from the same windows),
// the same handoff step by step in a separate traced pass (steps.go), the gap
// after the leader's key is deleted, crash failover after kill -9, etcd's
// cost per handoff against the number of waiting candidates, etcd's cost of
// many idle elections (fleet.go), and the idle footprint with its CPU per
// renewal; and, on a three-member etcd of its own (cluster.go), failovers
// with a frozen member or a slow link and the outage tolerance (faults.go).
// -profile DIR keeps CPU profiles of each fleet window, the candidates'
// and etcd's.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/trace"
)

type config struct {
	quick       bool
	out         string
	etcdleadBin string
	against     string // an etcdlead binary that stands in for etcdctl lock
	// againstContainment, if set, is the -against tool's --containment,
	// so that one binary is compared with itself under another one.
	againstContainment string
	only               map[string]bool
	keep               bool
	dataDir            string
	seed               uint64

	ttfcRuns, handoffRuns, failoverRuns, costHandoffs int
	stepRuns, deleteRuns                              int
	procWaiters, inprocWaiters                        []int
	idleWindow                                        time.Duration
	idleTTLs                                          []int
	queue                                             int
	fleetSizes                                        []int
	fleetWindow                                       time.Duration
	// profile, if set, is where each fleet window's CPU profiles go: this
	// process's (the candidates') and etcd's (run with --enable-pprof).
	profile string
	// rounds: rounds per fault of the member-fault failovers.
	rounds int
	// bisections: tries of the round-trip search of the tolerance table.
	bisections int
}

func (c *config) want(name string) bool { return len(c.only) == 0 || c.only[name] }

type bench struct {
	cfg        config
	root, dir  string
	bins       binaries
	env        []string
	etcd       *etcdProc
	endpoint   string
	metricsURL string
	cli        *clientv3.Client
	hub        *hub
	procs      procs
	tools      []*tool // [etcdlead, etcdctl lock]
	rng        *rand.Rand
	start      time.Time
}

func (b *bench) say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %6.1fs  %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	var cfg config
	var only string
	flag.BoolVar(&cfg.quick, "quick", false, "fewer samples and a 10 s idle window, for development; prints the report instead of writing BENCHMARKS.md")
	flag.StringVar(&cfg.out, "out", "", "write the report here (default: BENCHMARKS.md in the module root; with -quick, standard output)")
	flag.StringVar(&cfg.etcdleadBin, "etcdlead", "", "use this etcdlead binary instead of building the checkout (to compare a change)")
	flag.StringVar(&cfg.against, "against", "", "A/B of two etcdlead binaries: this one (its keeper beside it) stands in for etcdctl lock; needs -out and -only among ttfc,handoff,deleted,failover")
	flag.StringVar(&cfg.againstContainment, "against-containment", "", "with -against: run it with this --containment (auto, cgroup, process-group), to measure what a containment costs")
	flag.StringVar(&only, "only", "", "comma-separated subset of ttfc,handoff,steps,deleted,failover,cost,fleet,idle,failovers,crash,tolerance (failovers: with a frozen member and a slow link; crash: crash failovers with and without a raft leader change; both on a 3-member cluster)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the work directory (binaries, logs, etcd data)")
	flag.StringVar(&cfg.dataDir, "dir", "", "parent of the work directory, which holds etcd's data (default: the system temp dir, unless that is tmpfs)")
	flag.Uint64Var(&cfg.seed, "seed", 0, "seed for the random kill times (0: from the clock)")
	handoffs := flag.Int("handoffs", 0, "graceful handoffs per tool (default 60; -quick 10)")
	starts := flag.Int("starts", 0, "uncontended starts per tool (default 25; -quick 6)")
	failovers := flag.Int("failovers", 0, "kill -9 failovers per tool (default 30; -quick 3)")
	flag.IntVar(&cfg.queue, "queue", 3, "candidates per election in the handoff figure: the leader and queue-1 waiting")
	stepRuns := flag.Int("steps", 0, "traced graceful handoffs per tool, for the step-by-step figure (default 30; -quick 6)")
	deletes := flag.Int("deletes", 0, "deleted-key handoffs per tool, untraced and again traced (default 12; -quick 3)")
	fleet := flag.String("fleet", "1000,3000", "election counts of the fleet figure, comma-separated (10000 does not fit 2 cores, nor a limit of 20,000 open files: the report projects it from the largest measured)")
	rounds := flag.Int("rounds", 0, "rounds per fault of the failovers with a frozen member or a slow link (default 10; -quick 3)")
	flag.StringVar(&cfg.profile, "profile", "", "write CPU profiles of each fleet window (this process: the candidates; etcd, started with --enable-pprof) to this directory")
	fleetWindow := flag.Duration("fleet-window", 0, "idle window of each fleet configuration (default 30s; -quick 5s)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: scripts/bench [-quick] [-out FILE] [-etcdlead BIN] [-against BIN] [-only LIST] [-keep]")
		os.Exit(2)
	}
	if only != "" {
		cfg.only = map[string]bool{}
		for _, s := range strings.Split(only, ",") {
			cfg.only[strings.TrimSpace(s)] = true
		}
	}
	if cfg.against != "" {
		ok := cfg.out != "" && len(cfg.only) > 0
		for f := range cfg.only {
			ok = ok && (f == "ttfc" || f == "handoff" || f == "deleted" || f == "failover")
		}
		if !ok {
			fmt.Fprintln(os.Stderr, "bench: -against needs -out FILE and -only among ttfc,handoff,deleted,failover: the other figures read etcdctl lock's own keys and frames")
			os.Exit(2)
		}
		abs, err := filepath.Abs(cfg.against)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -against:", err)
			os.Exit(2)
		}
		cfg.against = abs
	}
	if cfg.quick {
		cfg.ttfcRuns, cfg.handoffRuns, cfg.failoverRuns, cfg.costHandoffs = 6, 10, 3, 3
		cfg.procWaiters, cfg.inprocWaiters = []int{5, 50}, []int{5, 50, 500}
		cfg.idleWindow, cfg.idleTTLs = 10*time.Second, []int{15, 2}
		cfg.stepRuns, cfg.deleteRuns, cfg.fleetWindow = 6, 3, 5*time.Second
		cfg.rounds, cfg.bisections = 3, 3
	} else {
		cfg.ttfcRuns, cfg.handoffRuns, cfg.failoverRuns, cfg.costHandoffs = 25, 60, 30, 6
		cfg.procWaiters, cfg.inprocWaiters = []int{5, 50}, []int{5, 50, 500}
		cfg.idleWindow, cfg.idleTTLs = 60*time.Second, []int{15, 2}
		cfg.stepRuns, cfg.deleteRuns, cfg.fleetWindow = 30, 12, 30*time.Second
		cfg.rounds, cfg.bisections = 10, 4
	}
	if *fleetWindow > 0 {
		cfg.fleetWindow = *fleetWindow
	}
	var err error
	if cfg.fleetSizes, err = parseSizes(*fleet); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -fleet:", err)
		os.Exit(2)
	}
	if os.Getenv(trace.Var) != "" {
		// The bench's own in-process candidates would write marks too.
		fmt.Fprintln(os.Stderr, "bench: unset "+trace.Var+": the bench sets it itself, for its traced pass only")
		os.Exit(2)
	}
	for _, o := range []struct{ flag, dst *int }{{handoffs, &cfg.handoffRuns}, {starts, &cfg.ttfcRuns}, {failovers, &cfg.failoverRuns}, {stepRuns, &cfg.stepRuns}, {deletes, &cfg.deleteRuns}, {rounds, &cfg.rounds}} {
		if *o.flag > 0 {
			*o.dst = *o.flag
		}
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	if cfg.only == nil || cfg.only["fleet"] {
		// Before etcd starts, which inherits the limit. A fleet that does
		// not fit fails on its own and the report says why.
		if err := raiseFileLimit(fleetFiles(cfg.fleetSizes)); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
	b := &bench{cfg: cfg, start: time.Now(), rng: rand.New(rand.NewPCG(cfg.seed, 1))}

	// A Ctrl-C stops every process the bench started; the kernel's death
	// signal covers a bench that dies harder.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "bench: interrupted; stopping everything")
		b.cleanup()
		os.Exit(130)
	}()
	err = b.run()
	b.cleanup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: FAILED: %v\n", err)
		if b.dir != "" && b.cfg.keep {
			fmt.Fprintf(os.Stderr, "bench: logs in %s/logs\n", b.dir)
		}
		os.Exit(1)
	}
}

func (b *bench) cleanup() {
	b.procs.killAll()
	if b.hub != nil {
		b.hub.Close()
	}
	if b.cli != nil {
		b.cli.Close()
	}
	b.etcd.stop()
	if b.dir != "" && !b.cfg.keep {
		os.RemoveAll(b.dir)
	}
}

func (b *bench) run() error {
	ctx := context.Background()
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	b.root = root
	parent := b.cfg.dataDir
	if parent == "" {
		parent = os.TempDir()
		if fsType(parent) == "tmpfs" {
			// etcd's fsyncs must reach a disk for the numbers to mean
			// anything; the user cache dir usually is one.
			if c, err := os.UserCacheDir(); err == nil {
				parent = c
			}
		}
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	if b.dir, err = os.MkdirTemp(parent, "etcdlead-bench-"); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(b.dir, "logs"), 0o755); err != nil {
		return err
	}
	b.say("building etcd, etcdctl, etcdlead and the child in %s", b.dir)
	if b.bins, err = build(ctx, root, b.dir, b.cfg.etcdleadBin); err != nil {
		return err
	}
	mach := describeMachine(root, b.bins, b.dir, b.cfg.etcdleadBin != "")
	busy0, total0 := cpuTimes()
	b.env = cleanEnv()
	var etcdFlags []string
	if b.cfg.profile != "" {
		etcdFlags = append(etcdFlags, "--enable-pprof")
	}
	if b.etcd, err = startEtcd(ctx, b.bins.etcd, b.dir, b.env, etcdFlags...); err != nil {
		return err
	}
	b.endpoint = b.etcd.endpoint
	b.metricsURL = "http://" + b.endpoint + "/metrics"
	b.say("etcd %s serving on %s, data in %s (%s, fsync on)", mach.EtcdVersion, b.endpoint, b.etcd.dataDir, mach.FS)
	if b.cli, err = newClient(b.endpoint); err != nil {
		return err
	}
	// The socket path must stay under 108 bytes, which a deep cache
	// directory may not.
	sockDir, err := os.MkdirTemp("", "eb-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(sockDir)
	if b.hub, err = newHub(filepath.Join(sockDir, "s")); err != nil {
		return err
	}
	b.tools = []*tool{etcdleadTool(b.bins.etcdlead), etcdctlTool(b.bins.etcdctl)}
	if b.cfg.against != "" {
		// Keyed as etcdctl lock, so that every figure takes it for the
		// second tool; its candidates keep etcdlead's own layout.
		t := etcdleadTool(b.cfg.against)
		t.Key, t.Name = ctl, "etcdlead at "+b.cfg.against
		if m := b.cfg.againstContainment; m != "" {
			args := t.args
			t.args = func(ep, election string, ttl int, id string, child []string) []string {
				return append([]string{"run", "--containment=" + m}, args(ep, election, ttl, id, child)[1:]...)
			}
			t.Name += " with --containment=" + m
		}
		b.tools[1] = t
	}

	r := &report{cfg: b.cfg, mach: mach, tools: b.tools}
	if b.cfg.want("ttfc") {
		b.say("time to first child: %d uncontended starts per tool, alternating", b.cfg.ttfcRuns)
		if r.ttfc, r.ttfcCommits, err = b.firstChild(ctx, b.cfg.ttfcRuns); err != nil {
			return fmt.Errorf("time to first child: %w", err)
		}
		b.say("time to first child, step by step: %d traced etcdlead starts", b.cfg.ttfcRuns)
		if r.ttfcSteps, r.ttfcMarks, err = b.firstChildSteps(ctx, b.cfg.ttfcRuns); err != nil {
			return fmt.Errorf("time to first child, step by step: %w", err)
		}
	}
	if b.cfg.want("ttfc") || b.cfg.want("handoff") {
		if r.startup, err = b.startups(ctx, b.cfg.ttfcRuns); err != nil {
			return fmt.Errorf("start-up: %w", err)
		}
	}
	if b.cfg.want("handoff") {
		b.say("graceful handoff: %d per tool, %d candidates each, alternating", b.cfg.handoffRuns, b.cfg.queue)
		if r.handoff, err = b.handoffs(ctx, b.cfg.handoffRuns, b.cfg.queue); err != nil {
			return fmt.Errorf("handoff: %w", err)
		}
		if b.cfg.queue != 2 {
			n := max(b.cfg.handoffRuns/3, 5)
			b.say("graceful handoff: %d per tool, 2 candidates each (the waiter is always next in line)", n)
			if r.handoff2, err = b.handoffs(ctx, n, 2); err != nil {
				return fmt.Errorf("handoff: %w", err)
			}
		}
	}
	if b.cfg.want("steps") || b.cfg.want("deleted") {
		n, deletes := b.cfg.stepRuns, b.cfg.deleteRuns
		if !b.cfg.want("steps") {
			n = 0
		}
		if !b.cfg.want("deleted") {
			deletes = 0
		}
		if r.steps, err = b.steps(ctx, n, deletes, b.cfg.queue); err != nil {
			return fmt.Errorf("step by step: %w", err)
		}
	}
	if b.cfg.want("deleted") {
		b.say("deleted key: %d per tool, 2 candidates each, alternating", b.cfg.deleteRuns)
		if r.deleted, err = b.deletedKey(ctx, b.cfg.deleteRuns); err != nil {
			return fmt.Errorf("deleted key: %w", err)
		}
	}
	if b.cfg.want("failover") {
		b.say("crash failover: %d kill -9 per tool, TTL 2s, alternating", b.cfg.failoverRuns)
		if r.failover, err = b.failovers(ctx, b.cfg.failoverRuns, 2); err != nil {
			return fmt.Errorf("failover: %w", err)
		}
	}
	if b.cfg.want("cost") {
		for _, n := range b.cfg.procWaiters {
			for _, t := range b.order(n) {
				b.say("etcd cost: %s, %d waiting processes, %d handoffs", t.Name, n, b.cfg.costHandoffs)
				run, err := b.costProcesses(ctx, t, n, b.cfg.costHandoffs)
				if err != nil {
					return fmt.Errorf("cost: %w", err)
				}
				r.cost = append(r.cost, run)
			}
		}
		for _, n := range b.cfg.inprocWaiters {
			b.say("etcd cost: etcdlead's campaign package, %d waiters in-process", n)
			run, err := b.costCampaign(ctx, n, b.cfg.costHandoffs)
			if err != nil {
				return fmt.Errorf("cost: %w", err)
			}
			r.cost = append(r.cost, run)
			b.say("etcd cost: concurrency.Mutex, %d waiters in-process", n)
			if run, err = b.costMutex(ctx, n, b.cfg.costHandoffs); err != nil {
				return fmt.Errorf("cost: %w", err)
			}
			r.cost = append(r.cost, run)
		}
	}
	if b.cfg.want("failovers") {
		b.say("failovers with a frozen member or a slow link: %d rounds per fault, 3-member cluster, TTL 2s", b.cfg.rounds)
		if r.memberFailovers, err = b.memberFailovers(ctx, b.cfg.rounds); err != nil {
			return fmt.Errorf("failovers: %w", err)
		}
	}
	if b.cfg.want("crash") {
		b.say("crash failovers with and without a raft leader change: %d rounds each, 3-member cluster, TTL 2s", b.cfg.rounds)
		if r.crash, err = b.crashFailovers(ctx, b.cfg.rounds); err != nil {
			return fmt.Errorf("crash failovers: %w", err)
		}
	}
	if b.cfg.want("tolerance") {
		b.say("outage tolerance: 3-member cluster, TTL 2s and 15s, and 15s with --renew-interval %v", longRenew)
		var timings []campaign.Timing
		for _, t := range []campaign.Timing{{TTL: 2 * time.Second}, {TTL: campaign.DefaultTTL}, {TTL: campaign.DefaultTTL, RenewInterval: longRenew}} {
			tm, err := campaign.ResolveTiming(t)
			if err != nil {
				return fmt.Errorf("tolerance: %w", err)
			}
			timings = append(timings, tm)
		}
		if r.tolerance, err = b.tolerance(ctx, timings, b.cfg.bisections); err != nil {
			return fmt.Errorf("tolerance: %w", err)
		}
	}
	if b.cfg.want("idle") {
		b.say("footprint: idle leaders and followers for %v", b.cfg.idleWindow)
		if r.idle, err = b.footprint(ctx, b.cfg.idleWindow, b.cfg.idleTTLs); err != nil {
			return fmt.Errorf("footprint: %w", err)
		}
	}
	// Last: a fleet leaves this process and its etcd busy for a while
	// after it (thousands of terms ended, their leases revoked, and one
	// that could not be held fails with many still running), and the
	// failovers, the tolerance and the footprint, measured after it, paid
	// for that: their faults leave a leader little time to spare.
	if b.cfg.want("fleet") && len(b.cfg.fleetSizes) > 0 {
		if r.fleet, err = b.fleet(ctx, b.cfg.fleetSizes, b.cfg.fleetWindow); err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
	}
	busy1, total1 := cpuTimes()
	if total1 > total0 {
		r.mach.BusyPercent = 100 * (busy1 - busy0) / (total1 - total0)
	}
	r.mach.LoadAfter = loadavg()
	r.elapsed = time.Since(b.start)
	r.date = time.Now().UTC()

	text := r.markdown()
	out := b.cfg.out
	if out == "" && !b.cfg.quick {
		out = filepath.Join(root, "BENCHMARKS.md")
	}
	if out == "" {
		fmt.Print(text)
		b.say("done (quick mode: report printed, BENCHMARKS.md untouched)")
		return nil
	}
	if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
		return err
	}
	b.say("done: wrote %s", out)
	return nil
}
