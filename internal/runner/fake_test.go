package runner

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/health"
	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/signals"
	"github.com/etcdlead/etcdlead/supervisor"
)

// safety bounds every wait on an event; it is never what a test measures.
const safety = 10 * time.Second

// journal is the order in which the fakes saw things happen.
type journal struct {
	mu      sync.Mutex
	events  []string
	changed chan struct{}
}

func newJournal() *journal { return &journal{changed: make(chan struct{})} }

func (j *journal) add(event string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, event)
	close(j.changed)
	j.changed = make(chan struct{})
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.events, ", ")
}

// waitFor waits until event has happened n times in all.
func (j *journal) waitFor(t *testing.T, event string, n int) {
	t.Helper()
	timeout := time.After(safety)
	for {
		j.mu.Lock()
		c, ch := 0, j.changed
		for _, e := range j.events {
			if e == event {
				c++
			}
		}
		j.mu.Unlock()
		if c >= n {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("no %q (x%d); events: %s", event, n, j)
		}
	}
}

// await is waitFor(event, 1) for a fake's goroutine, which must not
// fail the test: it gives up after safety, and the test's own wait fails.
func (j *journal) await(event string) {
	timeout := time.After(safety)
	for {
		j.mu.Lock()
		seen, ch := slices.Contains(j.events, event), j.changed
		j.mu.Unlock()
		if seen {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			return
		}
	}
}

// before checks that a happened, and before b if b happened.
func (j *journal) before(t *testing.T, a, b string) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	ia, ib := -1, -1
	for i, e := range j.events {
		if e == a && ia < 0 {
			ia = i
		}
		if e == b && ib < 0 {
			ib = i
		}
	}
	if ia < 0 || (ib >= 0 && ib < ia) {
		t.Fatalf("want %q before %q; events: %s", a, b, strings.Join(j.events, ", "))
	}
}

// count is how many times event happened.
func (j *journal) count(event string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.events {
		if e == event {
			n++
		}
	}
	return n
}

// has reports whether event happened.
func (j *journal) has(event string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Contains(j.events, event)
}

// settledBefore checks that every start had its done before the first
// event: nothing begun with start was under way at event.
func (j *journal) settledBefore(t *testing.T, start, done, event string) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	open := 0
	for _, e := range j.events {
		switch e {
		case start:
			open++
		case done:
			open--
		case event:
			if open != 0 {
				t.Fatalf("%q under way at %q; events: %s", start, event, strings.Join(j.events, ", "))
			}
			return
		}
	}
	t.Fatalf("no %q; events: %s", event, strings.Join(j.events, ", "))
}

// inOrder checks that events happened in this order (others between).
func (j *journal) inOrder(t *testing.T, events ...string) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	i := 0
	for _, e := range j.events {
		if i < len(events) && e == events[i] {
			i++
		}
	}
	if i < len(events) {
		t.Fatalf("want %s in this order; events: %s", strings.Join(events, ", "), strings.Join(j.events, ", "))
	}
}

// fakeTerm is a won term whose loss the test decides.
type fakeTerm struct {
	j    *journal
	n    int
	lose chan error
	// waiting is what Waiting answers: whether a candidate waits.
	waiting bool
	// renew, when sent a deadline, makes Lead tell it to the keeper
	// (onRenew), as a renewal would.
	renew chan time.Duration
	ended sync.Once
}

func (f *fakeTerm) term() Leadership { return f }

func (f *fakeTerm) ID() TermID {
	return TermID{Key: fmt.Sprintf("p/e/%x", f.n), Rev: int64(10 + f.n), Lease: int64(f.n), SlotRev: int64(10 + f.n)}
}

func (f *fakeTerm) Deadline() time.Duration { return time.Hour }
func (f *fakeTerm) ForgetRun()              { f.j.add("forget run") }
func (f *fakeTerm) End()                    { f.ended.Do(func() { f.j.add("end") }) }

func (f *fakeTerm) Revoke() {
	f.End()
	f.j.add("revoke")
}

func (f *fakeTerm) Waiting(context.Context) (bool, error) {
	f.j.add("waiting?")
	return f.waiting, nil
}

func (f *fakeTerm) Lead(ctx context.Context, onRenew func(time.Duration)) error {
	f.j.add("hold")
	defer f.j.add("hold returned")
	for {
		select {
		case err := <-f.lose:
			return err
		case d := <-f.renew:
			onRenew(d)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RecordHealth records nothing: the fake has no etcd to write to.
func (f *fakeTerm) RecordHealth(context.Context, string) error { return nil }

// fakeCampaigner answers each campaign with the next of answers; after
// them it waits until its context ends.
type fakeCampaigner struct {
	j       *journal
	answers []func(n int) (Leadership, error)
	mu      sync.Mutex
	calls   int
	// vacant: AwaitVacant answers at once that the election has no
	// candidate; else it waits for its context.
	vacant bool
	// lateWin, if set, is the term a campaign past its answers wins just
	// as its context ends, as a real one may.
	lateWin *fakeTerm
}

func (c *fakeCampaigner) Ping(context.Context) error {
	c.j.add("ping")
	return nil
}

func (c *fakeCampaigner) AwaitVacant(ctx context.Context) error {
	c.j.add("await vacant")
	if c.vacant {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

// fakeProbe is a check whose every answer the test gives (answer); a
// check stopped before it is answered notes "<name> stopped".
type fakeProbe struct {
	j       *journal
	name    string
	answers chan health.Result
}

func newProbe(j *journal, name string) *fakeProbe {
	return &fakeProbe{j: j, name: name, answers: make(chan health.Result)}
}

func (p *fakeProbe) Check(ctx context.Context, _ func() time.Duration) health.Result {
	p.j.add(p.name + " check")
	defer p.j.add(p.name + " done")
	select {
	case r := <-p.answers:
		r.At = time.Now()
		return r
	case <-ctx.Done():
		return health.Result{Err: "stopped"}
	}
}

// answer gives the next check its answer, once one runs.
func (p *fakeProbe) answer(t *testing.T, ok bool) {
	t.Helper()
	select {
	case p.answers <- health.Result{OK: ok, Code: map[bool]int{true: 0, false: 1}[ok]}:
	case <-time.After(safety):
		t.Fatalf("no %s check ran within %s; events: %s", p.name, safety, p.j)
	}
}

func (c *fakeCampaigner) Campaign(ctx context.Context) (Leadership, error) {
	c.mu.Lock()
	n := c.calls
	c.calls++
	c.mu.Unlock()
	c.j.add("campaign")
	if n < len(c.answers) {
		return c.answers[n](n)
	}
	<-ctx.Done()
	c.j.add("campaign cancelled")
	if c.lateWin != nil {
		return c.lateWin.term(), nil
	}
	return nil, campaign.ErrNotLeader
}

// fakeChild ends when the test says, or on Stop/Kill if it obeys.
type fakeChild struct {
	j    *journal
	n    int // which child of the run, from 0
	done chan struct{}
	once sync.Once
	res  supervisor.Result
	// gone closes with done, or where the keeper lingers at keeperExits.
	gone     chan struct{}
	lingers  bool
	goneOnce sync.Once
	obeys    bool // ends on the first Stop
	stdout   []string
}

func (c *fakeChild) exit(code int, reason supervisor.Reason) {
	c.end(supervisor.Result{Code: code, Reason: reason})
}

func (c *fakeChild) end(res supervisor.Result) {
	c.once.Do(func() {
		c.res = res
		c.j.add("child exited")
		close(c.done)
		if !c.lingers {
			c.keeperExits()
		}
	})
}

func (c *fakeChild) keeperExits() {
	c.goneOnce.Do(func() {
		c.j.add("keeper gone")
		close(c.gone)
	})
}

func (c *fakeChild) Pid() int              { return 4242 }
func (c *fakeChild) Done() <-chan struct{} { return c.done }
func (c *fakeChild) Gone() <-chan struct{} {
	c.j.add("await keeper")
	return c.gone
}
func (c *fakeChild) Result() supervisor.Result { return c.res }
func (c *fakeChild) SetDeadline(d time.Duration) {
	c.j.add(fmt.Sprintf("child %d deadline %s", c.n, d))
}
func (c *fakeChild) Stop(sig syscall.Signal) {
	c.j.add("stop " + signals.Name(sig))
	if c.obeys {
		go c.exit(128+int(sig), supervisor.ReasonStopped)
	}
}
func (c *fakeChild) Kill() {
	c.j.add("kill")
	go c.exit(137, supervisor.ReasonStopped)
}
func (c *fakeChild) Signal(sig syscall.Signal) { c.j.add("signal " + signals.Name(sig)) }

type fakeKeepers struct {
	j        *journal
	startErr error
	obeys    bool
	// lingers keeps each child's keeper after the child, until its
	// keeperExits.
	lingers  bool
	mu       sync.Mutex
	children []*fakeChild
	env      [][]string
}

func (k *fakeKeepers) Prepare() {}
func (k *fakeKeepers) Drop()    {}
func (k *fakeKeepers) Start(_ time.Duration, env []string) (Child, error) {
	if k.startErr != nil {
		k.j.add("start failed")
		return nil, k.startErr
	}
	k.mu.Lock()
	c := &fakeChild{j: k.j, n: len(k.children), done: make(chan struct{}), gone: make(chan struct{}), obeys: k.obeys, lingers: k.lingers}
	k.children = append(k.children, c)
	k.env = append(k.env, env)
	k.mu.Unlock()
	k.j.add("child started")
	return c, nil
}

func (k *fakeKeepers) child(t *testing.T, i int) *fakeChild {
	t.Helper()
	k.j.waitFor(t, "child started", i+1)
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.children[i]
}

// rig is a runner on fakes, run in the background.
type rig struct {
	j       *journal
	terms   []*fakeTerm
	camp    *fakeCampaigner
	keepers *fakeKeepers
	sigs    chan os.Signal
	cancel  context.CancelFunc
	out     chan *Outcome
	log     *logLines // the runner's log, as text
	mon     *ops.Monitor
}

// logLines is a log output that a test may read while the runner writes.
type logLines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func baseConfig() Config {
	l, _ := campaign.NewLayout("p/", "e")
	return Config{
		Campaign: campaign.Config{Layout: l, ID: "c1", RequestTimeout: time.Second,
			Timing: campaign.Timing{TTL: 10 * time.Second, KillTimeout: time.Second, FenceMargin: time.Second}},
		Spec:      supervisor.Spec{KillSignal: syscall.SIGTERM},
		Restart:   RestartNever,
		Endpoints: []string{"127.0.0.1:2379"}}
}

// wins makes the n-th campaign win a fresh term.
func (g *rig) wins() func(int) (Leadership, error) {
	ft := &fakeTerm{j: g.j, n: len(g.terms) + 1, lose: make(chan error, 1), renew: make(chan time.Duration)}
	g.terms = append(g.terms, ft)
	return func(int) (Leadership, error) { return ft.term(), nil }
}

func fails(err error) func(int) (Leadership, error) {
	return func(int) (Leadership, error) { return nil, err }
}

func newRig(t *testing.T, cfg Config, setup func(g *rig) []func(int) (Leadership, error)) *rig {
	g := &rig{j: newJournal(), sigs: make(chan os.Signal, 4), out: make(chan *Outcome, 1), log: &logLines{}}
	g.camp = &fakeCampaigner{j: g.j}
	g.keepers = &fakeKeepers{j: g.j}
	g.camp.answers = setup(g)
	g.mon = ops.New(cfg.Campaign.Layout.Name(), cfg.Campaign.ID, "test", cfg.Campaign.Timing.TTL, nil)
	log := hclog.New(&hclog.LoggerOptions{Output: g.log, Level: hclog.Info})
	r := New(cfg, g.camp, g.keepers, signals.Fake(g.sigs), g.mon, log)
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	t.Cleanup(cancel)
	go func() { g.out <- r.Run(ctx) }()
	return g
}

func (g *rig) outcome(t *testing.T) *Outcome {
	t.Helper()
	select {
	case o := <-g.out:
		return o
	case <-time.After(safety):
		t.Fatalf("the run did not end; events: %s", g.j)
		return nil
	}
}

func wantOutcome(t *testing.T, o *Outcome, k Kind, code int) {
	t.Helper()
	if o == nil || o.Kind != k || o.Code != code {
		t.Fatalf("outcome %+v, want %v with code %d", o, k, code)
	}
}
