package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
)

// holdOrFail is hold, with a term lost before its stop said on failed.
func holdOrFail(t *campaign.Term, failed chan<- error) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := t.Lead(ctx, func(time.Duration) {}); ctx.Err() == nil {
			select {
			case failed <- fmt.Errorf("leader %s lost its term: %w", t.Key, err):
			default:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// fleetBatch is how many candidates of a fleet start at once.
const fleetBatch = 100

// fleetClients is how many etcd clients the in-process candidates of a
// fleet of n elections use: one per candidate, as a fleet of etcdlead or
// etcdctl processes has. Sharing clients would let a tool that batches the
// requests of many candidates on one stream (etcdlead renews the terms that
// share a client together: internal/etcdwire/beat.go) look cheaper than a fleet of
// processes is.
func fleetClients(n int) int { return 2 * n }

// fleetFiles is how many file descriptors this process, and etcd beside
// it, need for the largest fleet: a connection per client, and room for
// the rest.
func fleetFiles(sizes []int) uint64 {
	most := 0
	for _, n := range sizes {
		most = max(most, n)
	}
	return uint64(fleetClients(most)) + 4096
}

// raiseFileLimit raises this process's limit of open files to at least
// need, before etcd starts, which inherits it. Raising the hard limit
// takes root (CAP_SYS_RESOURCE); without it a fleet that does not fit
// fails and the report says why.
func raiseFileLimit(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= need {
		return nil
	}
	lim.Cur, lim.Max = need, max(lim.Max, need)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raising the limit of open files to %d for the fleet's clients: %w (run as root, or raise ulimit -n)", need, err)
	}
	return nil
}

// fleetRun is one fleet configuration: n elections on one etcd, each with a
// leader and one waiting candidate, idling through a window; with no
// elections, etcd alone.
type fleetRun struct {
	Tool      string
	Renew     time.Duration // etcdlead's --renew-interval; 0: the default
	Elections int
	Window    time.Duration
	EtcdCPU   time.Duration      // etcd's process_cpu_seconds_total over the window
	SelfCPU   time.Duration      // this process's CPU over the window: the candidates' side
	Counts    map[string]float64 // handoffCounts over the window
	Err       string             // why the fleet could not be held and measured; "" if it was
}

// perElectionPerSecond is a counter's rate per election.
func (f *fleetRun) perElectionPerSecond(key string) float64 {
	return f.Counts[key] / f.Window.Seconds() / float64(max(f.Elections, 1))
}

// etcdCPUPerMinute is etcd's CPU seconds per minute of the window.
func (f *fleetRun) etcdCPUPerMinute() float64 {
	return f.EtcdCPU.Seconds() / f.Window.Minutes()
}

// fleet measures, for each size, etcdlead's campaign package and etcdctl
// lock's recipe, alternating which goes first.
func (b *bench) fleet(ctx context.Context, sizes []int, window time.Duration) ([]*fleetRun, error) {
	// etcd with no election at all, for what the elections add to it.
	b.say("fleet: etcd idle, no election, %v window", window)
	idle := &fleetRun{}
	if err := b.measureFleet(ctx, idle, window); err != nil {
		return nil, err
	}
	runs := []*fleetRun{idle}
	for i, n := range sizes {
		for _, t := range b.order(i) {
			b.say("fleet: %s, %d elections (a leader and a waiter each, in-process), %v window", t.Name, n, window)
			f := b.fleetCampaign
			if t.Key == ctl {
				f = b.fleetMutex
			}
			run, err := f(ctx, n, 0, window)
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				// A fleet that cannot be held is a finding, not a broken
				// bench: the report says why, and the other figures go on.
				b.say("fleet: %s, %d elections FAILED: %v", t.Name, n, err)
				run = &fleetRun{Tool: t.Key, Elections: n, Err: err.Error()}
			}
			runs = append(runs, run)
		}
		// The cheaper cadence that --renew-interval offers, for what it
		// takes off etcd's cost.
		b.say("fleet: etcdlead --renew-interval %v, %d elections, %v window", longRenew, n, window)
		run, err := b.fleetCampaign(ctx, n, longRenew, window)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			b.say("fleet: etcdlead --renew-interval %v, %d elections FAILED: %v", longRenew, n, err)
			run = &fleetRun{Tool: lead, Renew: longRenew, Elections: n, Err: err.Error()}
		}
		runs = append(runs, run)
	}
	return runs, nil
}

// longRenew is the --renew-interval the bench measures beside the
// default: the longest whole second that fits the default TTL with the
// default kill timeout and fence margin.
const longRenew = 4 * time.Second

// fleetSettle is the pause before a fleet's window: past every waiter's
// first renewal (TTL/3 after its campaign), which opens its client's
// renewal stream, so that the window holds the idle fleet's steady state
// and no stream set-up.
const fleetSettle = campaign.DefaultTTL/3 + 3*time.Second

// measureFleet scrapes etcd around an idle window, after the candidates
// settled.
func (b *bench) measureFleet(ctx context.Context, run *fleetRun, window time.Duration) error {
	if err := pause(ctx, fleetSettle); err != nil {
		return err
	}
	before, err := scrape(ctx, b.metricsURL)
	if err != nil {
		return err
	}
	self0 := selfCPU()
	t0 := time.Now()
	stopProfiles, err := b.startProfiles(ctx, run, window)
	if err != nil {
		return err
	}
	err = pause(ctx, window)
	stopProfiles()
	if err != nil {
		return err
	}
	after, err := scrape(ctx, b.metricsURL)
	if err != nil {
		return err
	}
	run.Window = time.Since(t0)
	run.SelfCPU = selfCPU() - self0
	d := delta{before, after}
	run.EtcdCPU = time.Duration(d.sum("process_cpu_seconds_total") * float64(time.Second))
	run.Counts = handoffCounts(d)
	return nil
}

// startProfiles starts, with -profile, a CPU profile of this process and
// one of etcd over the window; the returned func ends this process's and
// waits for etcd's.
func (b *bench) startProfiles(ctx context.Context, run *fleetRun, window time.Duration) (func(), error) {
	if b.cfg.profile == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(b.cfg.profile, 0o755); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("fleet-%s-%d", cmp.Or(run.Tool, "idle"), run.Elections)
	self, err := os.Create(filepath.Join(b.cfg.profile, name+"-candidates.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(self); err != nil {
		self.Close()
		return nil, err
	}
	etcdDone := make(chan struct{})
	go func() {
		defer close(etcdDone)
		url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(b.metricsURL, "/metrics"), int(window.Seconds()))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.say("etcd profile: %v", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(b.cfg.profile, name+"-etcd.pprof"))
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
	}()
	return func() {
		pprof.StopCPUProfile()
		self.Close()
		<-etcdDone
	}, nil
}

// selfCPU is this process's utime+stime.
func selfCPU() time.Duration {
	return time.Duration(readProc(os.Getpid()).ticks) * time.Second / clkTck
}

// fleetCampaign: n elections of etcdlead's campaign package, each a leader
// holding its term (renewals every min(TTL/10, 1 s), its guard) and a
// campaigner waiting behind it (renewals every TTL/3, its guard, a watch on
// the leader's sentinel). In-process leaders run no keeper and no child:
// what etcd sees of a leader is the same.
func (b *bench) fleetCampaign(ctx context.Context, n int, renew, window time.Duration) (*fleetRun, error) {
	run := &fleetRun{Tool: lead, Renew: renew, Elections: n}
	clis, closeClients, err := b.clients(fleetClients(n))
	if err != nil {
		return nil, err
	}
	defer closeClients()
	prefix := fmt.Sprintf("fleet/n%d-", n)
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	type won struct {
		i int
		t *campaign.Term
	}
	wins := make(chan won, n)
	failed := make(chan error, 2*n)
	// At most fleetBatch leaders campaign at once, and waiters start
	// fleetBatch at a time: etcd refuses requests ("too many requests")
	// when its applies fall far behind its commits.
	leaders := make(chan struct{}, fleetBatch)
	start := func(i int, role string) error {
		client := 2 * i // the leader's; the waiter's is the next
		if role != "l" {
			client++
		}
		layout, err := campaign.NewLayout("fleet/", fmt.Sprintf("n%d-e%d", n, i))
		if err != nil {
			return err
		}
		c, err := campaign.New(campaign.Config{
			Client: clis[client], Layout: layout, ID: fmt.Sprintf("%s%d", role, i),
			Timing: campaign.Timing{TTL: campaign.DefaultTTL, KillTimeout: campaign.DefaultKillTimeout,
				FenceMargin: campaign.DefaultFenceMargin(campaign.DefaultTTL), RenewInterval: renew},
			RequestTimeout: 30 * time.Second,
			Now:            bootclock.Now,
		})
		if err != nil {
			return err
		}
		if role == "l" {
			leaders <- struct{}{}
		}
		wg.Go(func() {
			t, err := c.Campaign(cctx)
			if role == "l" {
				<-leaders
			}
			switch {
			case err == nil && role == "l":
				wins <- won{i, t}
			case err == nil:
				t.Revoke()
				failed <- fmt.Errorf("waiter %d won while its leader held", i)
			case cctx.Err() == nil:
				failed <- err
			}
		})
		return nil
	}
	terms := make([]*campaign.Term, n)
	stops := make([]func(), n)
	// The waiters end first (each revokes its own lease), so that no
	// leader's revoke wakes one.
	defer func() {
		cancel()
		wg.Wait()
		var rw sync.WaitGroup
		for i, t := range terms {
			if t != nil {
				rw.Go(func() {
					stops[i]()
					t.Revoke()
				})
			}
		}
		rw.Wait()
	}()
	for i := range n {
		if err := start(i, "l"); err != nil {
			return nil, err
		}
	}
	for range n {
		select {
		case w := <-wins:
			terms[w.i] = w.t
			stops[w.i] = holdOrFail(w.t, failed)
		case err := <-failed:
			return nil, err
		case <-time.After(fleetWait(n)):
			return nil, fmt.Errorf("fleet: leaders not all elected within %v", fleetWait(n))
		}
	}
	// A queue key, a sentinel and a record per candidate.
	for i := range n {
		if err := start(i, "w"); err != nil {
			return nil, err
		}
		if started := i + 1; started%fleetBatch == 0 || started == n {
			if err := b.waitCount(ctx, prefix, int64(3*n+3*started), fleetWait(n)); err != nil {
				select {
				case why := <-failed:
					return nil, fmt.Errorf("%w; first failure: %w", err, why)
				default:
					return nil, err
				}
			}
		}
	}
	if err := b.measureFleet(ctx, run, window); err != nil {
		return nil, err
	}
	select {
	case err := <-failed:
		return nil, err
	default:
	}
	return run, nil
}

// fleetMutex: the same with etcdctl lock's recipe, one concurrency.Session
// (TTL as etcdlead's default, kept alive every TTL/3 over the client's one
// LeaseKeepAlive stream) and one concurrency.Mutex per candidate, in this
// process.
func (b *bench) fleetMutex(ctx context.Context, n int, _, window time.Duration) (*fleetRun, error) {
	run := &fleetRun{Tool: ctl, Elections: n}
	clis, closeClients, err := b.clients(fleetClients(n))
	if err != nil {
		return nil, err
	}
	defer closeClients()
	prefix := fmt.Sprintf("fleetm/n%d-", n)
	sessions := make([]*concurrency.Session, 2*n)
	defer func() {
		var cw sync.WaitGroup
		for _, s := range sessions {
			if s != nil {
				cw.Go(func() { s.Close() })
			}
		}
		cw.Wait()
	}()
	var mu sync.Mutex
	var firstErr error
	var sw sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range 2 * n {
		sw.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := concurrency.NewSession(clis[i], concurrency.WithTTL(int(campaign.DefaultTTL/time.Second)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = err
				return
			}
			sessions[i] = s
		})
	}
	sw.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	failed := make(chan error, 2*n)
	locked := make(chan int, 2*n)
	lock := func(i int) {
		m := concurrency.NewMutex(sessions[i], prefix+"e"+strconv.Itoa(i%n))
		wg.Go(func() {
			if err := m.Lock(cctx); err == nil {
				locked <- i
			} else if cctx.Err() == nil {
				failed <- err
			}
		})
	}
	for i := range n {
		lock(i)
		if started := i + 1; started%fleetBatch == 0 {
			// The holders lock fleetBatch at a time, as etcdlead's leaders.
			if err := b.waitCount(ctx, prefix, int64(started), fleetWait(n)); err != nil {
				return nil, err
			}
		}
	}
	for range n {
		select {
		case i := <-locked:
			if i >= n {
				return nil, fmt.Errorf("waiter %d locked while its holder held", i-n)
			}
		case err := <-failed:
			return nil, err
		case <-time.After(fleetWait(n)):
			return nil, fmt.Errorf("fleet: locks not all held within %v", fleetWait(n))
		}
	}
	for i := n; i < 2*n; i++ {
		lock(i)
		if started := i - n + 1; started%fleetBatch == 0 || started == n {
			if err := b.waitCount(ctx, prefix, int64(n+started), fleetWait(n)); err != nil {
				return nil, err
			}
		}
	}
	if err := b.measureFleet(ctx, run, window); err != nil {
		return nil, err
	}
	select {
	case err := <-failed:
		return nil, err
	case i := <-locked:
		return nil, fmt.Errorf("waiter %d locked while its holder held", i-n)
	default:
	}
	return run, nil
}

// fleetWait bounds each of a fleet's set-up steps: a minute, and more for
// the largest fleets, whose candidates all start at once on two cores.
func fleetWait(n int) time.Duration {
	return max(time.Minute, time.Duration(n)*20*time.Millisecond)
}

// parseSizes reads a comma-separated list of positive counts.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("not a positive count: %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}
