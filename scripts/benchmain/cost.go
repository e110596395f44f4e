package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
)

// costTTL is long enough that no waiter renews its lease inside a handoff
// window: waiters of both tools renew once per TTL/3, a cost per waiter and
// hour, not per handoff.
const costTTL = 3600

// settle is how long a window stays open after the next child started, so
// that what the new leader does on taking over (and any waiter's reaction)
// is counted.
const settle = 300 * time.Millisecond

// costRun is one configuration of the cost experiment.
type costRun struct {
	Label   string // column header
	Tool    string // tool key
	Waiters int
	// Handoffs holds, per handoff, what etcd counted: "req <Method>" for
	// each gRPC method's received messages, "events" for watch events
	// sent, "commits" for raft proposals committed.
	Handoffs []map[string]float64
}

// handoffCounts turns a window's delta into counts. etcd's gRPC metrics
// (go-grpc-middleware's prometheus provider) count a stream's end as one more
// message received, so for streams the requests are the messages received
// minus the streams that ended.
func handoffCounts(d delta) map[string]float64 {
	out := map[string]float64{}
	received := d.byLabel("grpc_server_msg_received_total", "grpc_method")
	handled := d.byLabel("grpc_server_handled_total", "grpc_method")
	started := d.byLabel("grpc_server_started_total", "grpc_method")
	for m, v := range received {
		if streamMethods[m] {
			v -= handled[m]
		}
		out["req "+m] = v
		out["requests"] += v
	}
	for m, v := range started {
		if streamMethods[m] {
			out["streams "+m] = v
		}
	}
	out["events"] = d.sum("etcd_debugging_mvcc_events_total")
	out["commits"] = d.sum("etcd_server_proposals_committed_total")
	return out
}

// streamMethods are etcd's streaming RPCs.
var streamMethods = map[string]bool{"Watch": true, "LeaseKeepAlive": true, "Snapshot": true}

// window brackets one handoff with scrapes: handoff must return once the
// next leader runs; the window stays open for settle after that.
func (b *bench) window(ctx context.Context, handoff func() error) (map[string]float64, error) {
	before, err := scrape(ctx, b.metricsURL)
	if err != nil {
		return nil, err
	}
	if err := handoff(); err != nil {
		return nil, err
	}
	if err := pause(ctx, settle); err != nil {
		return nil, err
	}
	after, err := scrape(ctx, b.metricsURL)
	if err != nil {
		return nil, err
	}
	return handoffCounts(delta{before, after}), nil
}

// costProcesses: one leader and waiters+handoffs waiting candidates, each a
// real process of t; every handoff leaves at least `waiters` waiting.
func (b *bench) costProcesses(ctx context.Context, t *tool, waiters, handoffs int) (*costRun, error) {
	run := &costRun{Label: fmt.Sprintf("%s, %d waiting processes", t.Name, waiters), Tool: t.Key, Waiters: waiters}
	p, err := b.newPool(ctx, t, fmt.Sprintf("cost%d", waiters), costTTL, 1+waiters+handoffs)
	if err != nil {
		return nil, err
	}
	defer p.close()
	if err := pause(ctx, time.Second); err != nil {
		return nil, err
	}
	for range handoffs {
		counts, err := b.window(ctx, func() error {
			old := p.leader
			old.Exit()
			next, err := b.hub.NextStart(p.group, 30*time.Second)
			if err != nil {
				return fmt.Errorf("%s: %w", t.Name, err)
			}
			p.leader = next
			if c := p.cands[old.ID]; c != nil {
				return c.Wait(15 * time.Second)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		run.Handoffs = append(run.Handoffs, counts)
	}
	return run, nil
}

// clients opens n clients. The cost figure's campaigners share them
// round-robin; a fleet gives each candidate its own (fleetClients).
func (b *bench) clients(n int) ([]*clientv3.Client, func(), error) {
	cs := make([]*clientv3.Client, n)
	closeAll := func() {
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
	}
	// Dialled a few at a time: a fleet's thousands would take minutes one
	// by one.
	errs := make([]error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cs[i], errs[i] = newClient(b.endpoint)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return nil, nil, err
	}
	return cs, closeAll, nil
}

// costCampaign: the same with etcdlead's campaign package in this process,
// which reaches 500 waiters without 500 processes. Each waiter is a real
// campaigner with its own lease and key; the leader holds its term (renewal,
// own-key watch) as the supervisor does, and hands off by revoking, as the
// supervisor does once its child's group is gone.
func (b *bench) costCampaign(ctx context.Context, waiters, handoffs int) (*costRun, error) {
	run := &costRun{Label: fmt.Sprintf("etcdlead's campaign package, %d waiters in-process", waiters), Tool: "etcdlead", Waiters: waiters}
	clis, closeClients, err := b.clients(4)
	if err != nil {
		return nil, err
	}
	defer closeClients()
	layout, err := campaign.NewLayout("etcdlead/", fmt.Sprintf("cost-inproc-%d", waiters))
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	won := make(chan *campaign.Term, 1+waiters+handoffs)
	failed := make(chan error, 1+waiters+handoffs)
	start := func(i int) error {
		c, err := campaign.New(campaign.Config{
			Client: clis[i%len(clis)], Layout: layout, ID: fmt.Sprintf("w%d", i),
			Timing:         campaign.Timing{TTL: costTTL * time.Second, KillTimeout: campaign.DefaultKillTimeout, FenceMargin: campaign.DefaultFenceMargin(costTTL * time.Second)},
			RequestTimeout: 10 * time.Second,
			Now:            bootclock.Now,
		})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, err := c.Campaign(cctx)
			switch {
			case err == nil:
				won <- t
			case cctx.Err() == nil:
				failed <- err
			}
		}()
		return nil
	}
	next := func() (*campaign.Term, error) {
		select {
		case t := <-won:
			return t, nil
		case err := <-failed:
			return nil, err
		case <-time.After(30 * time.Second):
			return nil, errors.New("campaign: no leader within 30s")
		}
	}
	if err := start(0); err != nil {
		return nil, err
	}
	leader, err := next()
	if err != nil {
		return nil, err
	}
	stopHold := hold(leader)
	defer func() { stopHold(); leader.Revoke() }()
	for i := 1; i <= waiters+handoffs; i++ {
		if err := start(i); err != nil {
			return nil, err
		}
	}
	if err := b.waitCount(ctx, layout.QueuePrefix(), int64(1+waiters+handoffs), 60*time.Second); err != nil {
		return nil, err
	}
	if err := pause(ctx, time.Second); err != nil {
		return nil, err
	}
	for range handoffs {
		counts, err := b.window(ctx, func() error {
			stopHold()
			leader.Revoke()
			t, err := next()
			if err != nil {
				return err
			}
			leader = t
			stopHold = hold(leader)
			return nil
		})
		if err != nil {
			return nil, err
		}
		run.Handoffs = append(run.Handoffs, counts)
	}
	return run, nil
}

// hold runs Term.Lead until the returned function is called.
func hold(t *campaign.Term) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = t.Lead(ctx, func(time.Duration) {})
		close(done)
	}()
	return func() {
		cancel()
		<-done
	}
}

// costMutex: etcdctl lock's own recipe, concurrency.Session and
// concurrency.Mutex, in this process, for the 500 waiters that the etcdctl
// lock processes do not reach. A handoff is what etcdctl lock does when its
// command exits: Unlock, then end without revoking the session's lease.
func (b *bench) costMutex(ctx context.Context, waiters, handoffs int) (*costRun, error) {
	run := &costRun{Label: fmt.Sprintf("concurrency.Mutex (etcdctl lock's recipe), %d waiters in-process", waiters), Tool: "etcdctl", Waiters: waiters}
	clis, closeClients, err := b.clients(4)
	if err != nil {
		return nil, err
	}
	defer closeClients()
	name := fmt.Sprintf("cost-mutex-%d", waiters)
	total := 1 + waiters + handoffs
	sessions := make([]*concurrency.Session, total)
	mutexes := make([]*concurrency.Mutex, total)
	defer func() {
		for _, s := range sessions {
			if s != nil {
				s.Close()
			}
		}
	}()
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	won := make(chan int, total)
	failed := make(chan error, total)
	start := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := mutexes[i].Lock(cctx); err == nil {
				won <- i
			} else if cctx.Err() == nil {
				failed <- err
			}
		}()
	}
	next := func() (int, error) {
		select {
		case i := <-won:
			return i, nil
		case err := <-failed:
			return 0, err
		case <-time.After(30 * time.Second):
			return 0, errors.New("mutex: no holder within 30s")
		}
	}
	var mu sync.Mutex
	var firstErr error
	var swg sync.WaitGroup
	for i := range total {
		swg.Add(1)
		go func() {
			defer swg.Done()
			s, err := concurrency.NewSession(clis[i%len(clis)], concurrency.WithTTL(costTTL))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = err
				return
			}
			sessions[i] = s
			mutexes[i] = concurrency.NewMutex(s, name)
		}()
	}
	swg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	start(0)
	leader, err := next()
	if err != nil {
		return nil, err
	}
	for i := 1; i < total; i++ {
		start(i)
	}
	if err := b.waitCount(ctx, name+"/", int64(total), 60*time.Second); err != nil {
		return nil, err
	}
	if err := pause(ctx, time.Second); err != nil {
		return nil, err
	}
	for range handoffs {
		counts, err := b.window(ctx, func() error {
			if err := mutexes[leader].Unlock(ctx); err != nil {
				return err
			}
			sessions[leader].Orphan()
			i, err := next()
			leader = i
			return err
		})
		if err != nil {
			return nil, err
		}
		run.Handoffs = append(run.Handoffs, counts)
	}
	return run, nil
}

// rows lists the counters that any run saw, requests by method first.
func costRows(runs []*costRun) []string {
	seen := map[string]bool{}
	for _, r := range runs {
		for _, h := range r.Handoffs {
			for k, v := range h {
				if v != 0 && strings.HasPrefix(k, "req ") {
					seen[k] = true
				}
			}
		}
	}
	var rows []string
	for k := range seen {
		rows = append(rows, k)
	}
	sort.Strings(rows)
	rows = append(rows, "requests")
	var streams []string
	for _, r := range runs {
		for _, h := range r.Handoffs {
			for k, v := range h {
				if v != 0 && strings.HasPrefix(k, "streams ") && !seen[k] {
					seen[k] = true
					streams = append(streams, k)
				}
			}
		}
	}
	sort.Strings(streams)
	return append(append(rows, streams...), "events", "commits")
}

// stat is the median of one counter over a run's handoffs, and its range.
func (r *costRun) stat(key string) (med, lo, hi float64) {
	var v []float64
	for _, h := range r.Handoffs {
		v = append(v, h[key])
	}
	lo, hi = minMaxF(v)
	return medianF(v), lo, hi
}
