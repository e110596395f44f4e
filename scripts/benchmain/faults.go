package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/fence"
)

// The figures of member faults and slow links: failovers per rounds
// (failovers with a frozen member, with a slow link) and the outage
// tolerance. Both run in-process on a three-member cluster (cluster.go),
// each candidate with a client of its own that has every member's
// endpoint. In-process, an etcdlead leader has no keeper and no child: it
// counts as having lost its term when its fence point passes (the keeper
// would then stop the child), when Lead ends, or when its waiter wins; an
// etcdctl lock leader when its session ends (etcdctl lock then ends its
// command) or its waiter locks.

// leaderProbe is one candidate that holds, and what became of it.
type leaderProbe struct {
	lost    atomic.Int64 // bench nanoseconds (time.Now().UnixNano()) when it lost; 0: holds
	why     atomic.Value // string: how it lost, first
	stop    func()
	clients []*clientv3.Client
}

func (p *leaderProbe) lose(why string) {
	if p.lost.CompareAndSwap(0, time.Now().UnixNano()) {
		p.why.Store(why)
	}
}

func (p *leaderProbe) reason() string {
	s, _ := p.why.Load().(string)
	return s
}

func (p *leaderProbe) close() {
	if p.stop != nil {
		p.stop()
	}
	for _, c := range p.clients {
		c.Close()
	}
}

// timingFor is etcdlead's default timing at ttl.
func timingFor(ttl time.Duration) (campaign.Timing, error) {
	return campaign.ResolveTiming(campaign.Timing{TTL: ttl})
}

// leadCampaign starts an etcdlead leader and, with waiter, a candidate
// behind it, on election name of c, and returns once the leader leads.
func (b *bench) leadCampaign(ctx context.Context, c *cluster, name string, tm campaign.Timing, waiter bool) (*leaderProbe, error) {
	p := &leaderProbe{}
	newCampaigner := func(id string) (*campaign.Campaigner, error) {
		cli, err := c.client()
		if err != nil {
			return nil, err
		}
		p.clients = append(p.clients, cli)
		layout, err := campaign.NewLayout("faults/", name)
		if err != nil {
			return nil, err
		}
		return campaign.New(campaign.Config{
			Client: cli, Layout: layout, ID: id, Timing: tm,
			RequestTimeout: 30 * time.Second, Now: bootclock.Now,
		})
	}
	lc, err := newCampaigner("leader")
	if err != nil {
		p.close()
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	t, err := lc.Campaign(cctx)
	cancel()
	if err != nil {
		p.close()
		return nil, fmt.Errorf("%s: leader: %w", name, err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		err := t.Lead(hctx, func(time.Duration) {})
		if hctx.Err() == nil {
			p.lose("stopped leading: " + err.Error())
		}
	})
	// The fence, as the keeper would fire it.
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-tick.C:
			}
			f := fence.Fence{Deadline: t.Deadline(), KillTimeout: tm.KillTimeout, Margin: tm.FenceMargin}
			if f.Past(bootclock.Now()) {
				p.lose("fenced")
				return
			}
		}
	})
	if waiter {
		wc, err := newCampaigner("waiter")
		if err != nil {
			hcancel()
			wg.Wait()
			t.Revoke()
			p.close()
			return nil, err
		}
		wg.Go(func() {
			if w, err := wc.Campaign(hctx); err == nil {
				p.lose("the waiter won")
				w.Revoke()
			}
		})
	}
	p.stop = func() {
		hcancel()
		wg.Wait()
		t.Revoke()
	}
	return p, nil
}

// lockMutex is the same with etcdctl lock's recipe: a session of TTL ttl
// and a concurrency.Mutex, for the leader and, with waiter, one behind it.
func (b *bench) lockMutex(ctx context.Context, c *cluster, name string, ttl time.Duration, waiter bool) (*leaderProbe, error) {
	p := &leaderProbe{}
	session := func() (*concurrency.Session, error) {
		cli, err := c.client()
		if err != nil {
			return nil, err
		}
		p.clients = append(p.clients, cli)
		return concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)))
	}
	ls, err := session()
	if err != nil {
		p.close()
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = concurrency.NewMutex(ls, "faultsm/"+name).Lock(lctx)
	cancel()
	if err != nil {
		ls.Close()
		p.close()
		return nil, fmt.Errorf("%s: lock: %w", name, err)
	}
	hctx, hcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ls.Done():
			p.lose("session ended")
		case <-hctx.Done():
		}
	})
	var ws *concurrency.Session
	if waiter {
		if ws, err = session(); err != nil {
			hcancel()
			wg.Wait()
			ls.Close()
			p.close()
			return nil, err
		}
		wg.Go(func() {
			if err := concurrency.NewMutex(ws, "faultsm/"+name).Lock(hctx); err == nil {
				p.lose("the waiter locked")
			}
		})
	}
	p.stop = func() {
		hcancel()
		wg.Wait()
		if ws != nil {
			ws.Close()
		}
		ls.Close()
	}
	return p, nil
}

// fault is one fault put on a cluster: start puts it on, and returns what
// ends it.
type fault struct {
	Name  string
	start func(ctx context.Context, c *cluster) (end func(), err error)
}

func freezeFault(name string, pick func(ctx context.Context, c *cluster) ([]int, error)) fault {
	return fault{Name: name, start: func(ctx context.Context, c *cluster) (func(), error) {
		ms, err := pick(ctx, c)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			c.freeze(m)
		}
		return func() {
			for _, m := range ms {
				c.thaw(m)
			}
		}, nil
	}}
}

func raftLeaderOnly(ctx context.Context, c *cluster) ([]int, error) {
	l, err := c.raftLeader(ctx)
	return []int{l}, err
}

func followerOnly(ctx context.Context, c *cluster) ([]int, error) {
	l, err := c.raftLeader(ctx)
	return []int{(l + 1) % len(c.members)}, err
}

func leaderAndFollower(ctx context.Context, c *cluster) ([]int, error) {
	l, err := c.raftLeader(ctx)
	return []int{l, (l + 1) % len(c.members)}, err
}

func allMembers(_ context.Context, c *cluster) ([]int, error) {
	return []int{0, 1, 2}, nil
}

// slowLink delays every byte by rtt/2 each way, on every member's proxy.
func slowLink(rtt time.Duration) fault {
	return fault{Name: fmt.Sprintf("a slow link (round trip %v)", rtt), start: func(_ context.Context, c *cluster) (func(), error) {
		c.delay(rtt / 2)
		return func() { c.delay(0) }, nil
	}}
}

// failoverRow is one fault's failovers per rounds, by tool.
type failoverRow struct {
	Fault     string
	Rounds    int
	TTL       time.Duration
	Duration  time.Duration
	Failovers map[string]int // by tool key
	Why       map[string][]string
}

// memberFailovers runs rounds of each fault at TTL 2 s on one cluster: in
// each round a fresh election per tool, a leader and a waiter each, the
// fault for 3×TTL, then TTL to settle; a round counts as a failover for a
// tool whose leader lost its term.
func (b *bench) memberFailovers(ctx context.Context, rounds int) ([]*failoverRow, error) {
	const ttl = 2 * time.Second
	c, err := b.startCluster(ctx, "failovers")
	if err != nil {
		return nil, err
	}
	defer c.stop()
	tm, err := timingFor(ttl)
	if err != nil {
		return nil, err
	}
	faults := []fault{
		freezeFault("the raft leader member frozen (SIGSTOP)", raftLeaderOnly),
		freezeFault("a follower member frozen (SIGSTOP)", followerOnly),
		slowLink(ttl / 2),
	}
	var rows []*failoverRow
	for _, f := range faults {
		row := &failoverRow{Fault: f.Name, Rounds: rounds, TTL: ttl, Duration: 3 * ttl, Failovers: map[string]int{}, Why: map[string][]string{}}
		for i := range rounds {
			b.say("failovers: %s, round %d of %d, both tools at once", f.Name, i+1, rounds)
			name := fmt.Sprintf("f%d-%d", len(rows), i)
			lp, err := b.leadCampaign(ctx, c, name, tm, true)
			if err != nil {
				return nil, err
			}
			mp, err := b.lockMutex(ctx, c, name, ttl, true)
			if err != nil {
				lp.close()
				return nil, err
			}
			// The waiters' first requests go out before the fault.
			err = pause(ctx, ttl/2)
			var end func()
			if err == nil {
				end, err = f.start(ctx, c)
			}
			if err == nil {
				err = pause(ctx, row.Duration) // the fault's duration
				end()
				if err == nil {
					err = pause(ctx, ttl)
				}
			}
			for key, p := range map[string]*leaderProbe{lead: lp, ctl: mp} {
				if p.lost.Load() != 0 {
					row.Failovers[key]++
					row.Why[key] = append(row.Why[key], p.reason())
					b.say("failovers: %s lost its term: %s", key, p.reason())
				}
			}
			lp.close()
			mp.close()
			if err != nil {
				return nil, err
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// toleranceRow is how long one fault may last before an etcdlead leader
// fences itself, at one TTL.
type toleranceRow struct {
	TTL      time.Duration
	Renew    time.Duration // the leader's renewal interval r; given when not the default
	Fault    string
	Computed time.Duration // T - K - m - r
	// Measured is the fault's longest duration the leader rode out, or,
	// with Fenced, when its fence point passed after the fault began.
	Measured time.Duration
	Fenced   bool
	Tries    string // what was tried, for the report
}

// tolerance measures, at each TTL: an etcd outage (every member frozen)
// and no raft leader (two of three frozen, the third without a quorum),
// each held until the fence point passes, which gives the tolerance in
// one try; a frozen follower and a frozen raft leader, each for 2×TTL,
// which the leader should ride out; and the longest round trip it rides
// out, searched by bisection between 0 and T.
func (b *bench) tolerance(ctx context.Context, timings []campaign.Timing, bisections int) ([]*toleranceRow, error) {
	c, err := b.startCluster(ctx, "tolerance")
	if err != nil {
		return nil, err
	}
	defer c.stop()
	var rows []*toleranceRow
	n := 0
	for _, tm := range timings {
		ttl := tm.TTL
		computed := tm.OutageTolerance()
		// trial holds a fresh leader through f for up to hold, ending the
		// fault early once the fence point passed; it says when that was
		// after the fault began, or 0.
		trial := func(f fault, hold time.Duration) (time.Duration, error) {
			n++
			b.say("tolerance: TTL %v, renewal interval %v, %s, up to %v", ttl, tm.RenewInterval, f.Name, hold)
			p, err := b.leadCampaign(ctx, c, fmt.Sprintf("t%d", n), tm, false)
			if err != nil {
				return 0, err
			}
			defer p.close()
			// The first renewal on the stream goes out before the fault.
			if err := pause(ctx, 2*tm.RenewInterval); err != nil {
				return 0, err
			}
			end, err := f.start(ctx, c)
			if err != nil {
				return 0, err
			}
			t0 := time.Now()
			deadline := time.NewTimer(hold)
			defer deadline.Stop()
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
		wait:
			for p.lost.Load() == 0 {
				select {
				case <-ctx.Done():
					end()
					return 0, ctx.Err()
				case <-deadline.C:
					break wait
				case <-tick.C:
				}
			}
			end()
			// An answer that comes once the fault ends cannot undo a
			// fence; a leader that held to the end is watched for a third
			// of a TTL more, while the renewals sent during the fault are
			// answered.
			if p.lost.Load() == 0 {
				if err := pause(ctx, ttl/3); err != nil {
					return 0, err
				}
			}
			if l := p.lost.Load(); l != 0 {
				return max(time.Duration(l-t0.UnixNano()), 1), nil
			}
			return 0, nil
		}
		for _, f := range []fault{
			freezeFault("an etcd outage (every member frozen)", allMembers),
			freezeFault("no raft leader (the raft leader and a follower frozen)", leaderAndFollower),
			freezeFault("a stalled follower (frozen)", followerOnly),
			freezeFault("a stalled raft leader (frozen)", raftLeaderOnly),
		} {
			hold := 2 * ttl
			at, err := trial(f, hold)
			if err != nil {
				return nil, err
			}
			row := &toleranceRow{TTL: ttl, Renew: tm.RenewInterval, Fault: f.Name, Computed: computed, Measured: at, Fenced: at > 0}
			if !row.Fenced {
				row.Measured = hold
			}
			rows = append(rows, row)
		}
		// The round trip: bisection between lo (rode out) and hi (fenced).
		lo, hi := time.Duration(0), ttl
		var tries []string
		for range bisections {
			rtt := ((lo + hi) / 2).Round(10 * time.Millisecond)
			at, err := trial(slowLink(rtt), 3*ttl/2)
			if err != nil {
				return nil, err
			}
			if at > 0 {
				hi = rtt
				tries = append(tries, fmt.Sprintf("%v fenced", rtt))
			} else {
				lo = rtt
				tries = append(tries, fmt.Sprintf("%v held", rtt))
			}
		}
		// A renewal's answer moves the deadline to its send + T, so it
		// helps while it comes back before the fence point of the last
		// answer's send. Once a link turns slow, the next send may come r
		// after the last one answered in time, and its answer must be back
		// within T - K - m of that one's send: the outage tolerance,
		// T - K - m - r.
		rows = append(rows, &toleranceRow{TTL: ttl, Renew: tm.RenewInterval, Fault: "a round trip", Computed: computed, Measured: lo, Tries: strings.Join(tries, ", ")})
	}
	return rows, nil
}

// crashRow is etcdlead's crash failovers on the three-member cluster, with
// or without a raft leader change since the crashed leader's grant.
type crashRow struct {
	Moved bool
	TTL   time.Duration
	Took  sample // from the leader's last renewal's end to the waiter's election
	Held  int    // failovers in which the waiter held the ended term's record
}

// crashFailovers runs rounds of a crash of an in-process etcdlead leader
// (its renewals stop; nothing deletes its keys or record) with one waiter,
// at TTL 2 s, alternating a round with no raft leader change and one with
// the raft leadership moved after the leader's grant (docs/design.md, "The
// term record": the waiter then holds the record a TTL and mu after the
// lease is gone).
func (b *bench) crashFailovers(ctx context.Context, rounds int) ([]*crashRow, error) {
	const ttl = 2 * time.Second
	c, err := b.startCluster(ctx, "crash")
	if err != nil {
		return nil, err
	}
	defer c.stop()
	tm, err := timingFor(ttl)
	if err != nil {
		return nil, err
	}
	rows := []*crashRow{{TTL: ttl}, {Moved: true, TTL: ttl}}
	for i := range rounds {
		for _, row := range rows {
			b.say("crash failovers: round %d of %d, raft leader moved: %v", i+1, rounds, row.Moved)
			took, held, err := b.crashOnce(ctx, c, fmt.Sprintf("crash%d-%v", i, row.Moved), tm, row.Moved)
			if err != nil {
				return nil, err
			}
			row.Took = append(row.Took, took)
			if held {
				row.Held++
			}
		}
	}
	return rows, nil
}

// crashOnce is one crash failover: a leader, a waiter, the raft leadership
// moved if moved, then the leader's renewals stopped.
func (b *bench) crashOnce(ctx context.Context, c *cluster, name string, tm campaign.Timing, moved bool) (time.Duration, bool, error) {
	var clients []*clientv3.Client
	defer func() {
		for _, cli := range clients {
			cli.Close()
		}
	}()
	holds := &holdCounter{Logger: hclog.NewNullLogger(), queued: make(chan struct{})}
	newCampaigner := func(id string, log hclog.Logger) (*campaign.Campaigner, error) {
		cli, err := c.client()
		if err != nil {
			return nil, err
		}
		clients = append(clients, cli)
		layout, err := campaign.NewLayout("crash/", name)
		if err != nil {
			return nil, err
		}
		return campaign.New(campaign.Config{
			Client: cli, Layout: layout, ID: id, Timing: tm, Logger: log,
			RequestTimeout: 30 * time.Second, Now: bootclock.Now,
		})
	}
	lc, err := newCampaigner("leader", hclog.NewNullLogger())
	if err != nil {
		return 0, false, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t, err := lc.Campaign(cctx)
	if err != nil {
		return 0, false, fmt.Errorf("%s: leader: %w", name, err)
	}
	defer t.Revoke()
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	held := make(chan error, 1)
	go func() { held <- t.Lead(hctx, func(time.Duration) {}) }()
	// The move before the waiter campaigns, so that no campaign
	// transaction of the waiter's meets it.
	if moved {
		if err := c.moveLeader(ctx); err != nil {
			return 0, false, err
		}
	}
	wc, err := newCampaigner("waiter", holds)
	if err != nil {
		return 0, false, err
	}
	won := make(chan time.Duration, 1)
	var werr error
	wctx, wcancel := context.WithTimeout(ctx, 4*tm.TTL+30*time.Second)
	defer wcancel()
	go func() {
		// Again after an error a retry can mend, as the runner
		// campaigns again.
		for {
			w, err := wc.Campaign(wctx)
			if err == nil {
				won <- bootclock.Now()
				w.Revoke()
				return
			}
			if wctx.Err() != nil || campaign.Permanent(err) {
				werr = err
				won <- -1
				return
			}
			if pause(wctx, 100*time.Millisecond) != nil {
				werr = err
				won <- -1
				return
			}
		}
	}()
	select {
	case <-holds.queued:
	case at := <-won:
		return 0, false, fmt.Errorf("%s: the waiter did not queue behind the leader (done at %v): %w", name, at, werr)
	}
	// Renewals after the move, with the waiter queued; then the crash, at
	// a random moment of etcd's check for expired leases (every 500 ms), as
	// in the single member's crash failovers: rounds of fixed length would
	// meet that check at one phase, every round.
	if err := pause(ctx, tm.TTL/2+time.Duration(b.rng.IntN(500))*time.Millisecond); err != nil {
		return 0, false, err
	}
	stop()
	<-held
	// The crash: the last renewal's answer is in, none follows.
	t0 := bootclock.Now()
	at := <-won
	if at < 0 {
		return 0, false, fmt.Errorf("%s: the waiter did not lead: %w", name, werr)
	}
	return at - t0, holds.held.Load() > 0, nil
}

// holdCounter is a logger that counts the holds of ended terms' records,
// and closes queued once the campaign waits on its predecessor.
type holdCounter struct {
	hclog.Logger
	held   atomic.Int64
	queued chan struct{}
	once   sync.Once
}

func (h *holdCounter) Info(msg string, args ...any) {
	if msg == "waiting on predecessor" {
		h.once.Do(func() { close(h.queued) })
	}
	if strings.Contains(msg, "waiting out its TTL before taking its record away") {
		h.held.Add(1)
	}
}
