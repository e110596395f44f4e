package runner

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/health"
	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
	"github.com/etcdlead/etcdlead/supervisor"
)

// The test binary doubles as the keeper, as etcdlead does: the tests of a
// real --notify command start keepers.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervisor.KeeperArg {
		os.Exit(supervisor.RunKeeper(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// fakeHook is a --notify command. Each run is "hook ROLE" and "hook ROLE
// done" in the journal; with hold, a run ends only once the test sends
// on release. It notes what each run was told, and fails the test if two
// runs overlap or one starts while a child it was not told of runs.
type fakeHook struct {
	j       *journal
	t       *testing.T
	hold    bool
	release chan struct{}
	// answer, if set, is a run's result by role.
	answer func(role string) health.Result
	// alive, if set, reports whether a child of the run still lives.
	alive func() bool

	mu      sync.Mutex
	running bool
	told    []string // "ROLE REV REASON" for each run
	env     [][]string
	args    [][]string
}

func newHook(t *testing.T, hold bool) *fakeHook {
	return &fakeHook{t: t, hold: hold, release: make(chan struct{}, 16)}
}

func (h *fakeHook) run(args, env []string) health.Result {
	role := args[len(args)-1]
	h.mu.Lock()
	if h.running {
		h.t.Errorf("a --notify run for %s began while another ran", role)
	}
	h.running = true
	h.told = append(h.told, role+" "+lookup(env, EnvRev)+" "+lookup(env, EnvReason))
	h.env, h.args = append(h.env, env), append(h.args, args)
	h.mu.Unlock()
	if role == ops.HookFollower && h.alive != nil && h.alive() {
		h.t.Errorf("follower told while a child of the ended term still ran")
	}
	h.j.add("hook " + role)
	if h.hold {
		<-h.release
	}
	h.mu.Lock()
	h.running = false
	h.mu.Unlock()
	h.j.add("hook " + role + " done")
	if h.answer != nil {
		return h.answer(role)
	}
	return health.Result{OK: true}
}

func (h *fakeHook) runs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.told)
}

func (h *fakeHook) wantTold(t *testing.T, want ...string) {
	t.Helper()
	if got := h.runs(); !slices.Equal(got, want) {
		t.Errorf("--notify told %q, want %q", got, want)
	}
}

// lookup is the value of name in env, the last one as exec takes it.
func lookup(env []string, name string) string {
	v := "<unset>"
	for _, kv := range env {
		if k, val, _ := strings.Cut(kv, "="); k == name {
			v = val
		}
	}
	return v
}

// notifyConfig tells h of each role; each role set is "set ROLE" in the
// journal.
func notifyConfig(h *fakeHook) Config {
	cfg := baseConfig()
	cfg.Notify = &Notify{run: h.run, seen: func(role string) { h.j.add("set " + role) },
		Command: health.Command{Env: []string{"KEPT=1", EnvRole + "=inherited"}}}
	return cfg
}

func wantMetric(t *testing.T, mon *ops.Monitor, series string) {
	t.Helper()
	rec := httptest.NewRecorder()
	ops.Handler(mon).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "\n"+series+"\n") {
		t.Errorf("/metrics lacks %s", series)
	}
}

// leader is told only once the child started, follower only once the
// ended term's child is gone, and stopped at the run's end, which waits
// for it. Each run gets the role as $1 and in ETCDLEAD_ROLE, the term's
// fencing token and why, over what it inherits.
func TestNotifyLeaderAfterStartFollowerAfterChildGone(t *testing.T) {
	h := newHook(t, false)
	var g *rig
	h.alive = func() bool {
		for _, c := range g.keepers.children {
			select {
			case <-c.done:
			default:
				return true
			}
		}
		return false
	}
	g = newRig(t, notifyConfig(h), func(g *rig) []func(int) (Leadership, error) {
		h.j = g.j
		return []func(int) (Leadership, error){g.wins(), g.wins()}
	})
	c := g.keepers.child(t, 0)
	g.j.waitFor(t, "hook leader done", 1)
	g.terms[0].lose <- campaign.ErrKeyDeleted
	g.j.waitFor(t, "stop SIGTERM", 1)
	c.exit(143, supervisor.ReasonStopped)
	g.keepers.child(t, 1)
	g.j.waitFor(t, "hook leader done", 2)
	g.j.inOrder(t, "child started", "hook leader", "stop SIGTERM", "child exited", "hook follower", "child started", "hook leader")
	g.sigs <- syscall.SIGTERM
	g.j.waitFor(t, "stop SIGTERM", 2)
	g.keepers.child(t, 1).exit(143, supervisor.ReasonStopped)
	o := g.outcome(t)
	if !g.j.has("hook stopped done") {
		t.Errorf("the run ended before the command was told stopped: %s", g.j)
	}
	wantOutcome(t, o, Stopped, 143)
	h.wantTold(t, "leader 11 elected", "follower 11 key-deleted", "leader 12 elected", "stopped 12 stopped")
	if a := h.args[0]; !slices.Equal(a, []string{"etcdlead-notify", "leader"}) {
		t.Errorf("sh's $0 and on: %q, want the role as $1", a)
	}
	env := h.env[0]
	for name, want := range map[string]string{EnvRole: "leader", EnvName: "e", EnvID: "c1", "KEPT": "1"} {
		if got := lookup(env, name); got != want {
			t.Errorf("%s=%s, want %s", name, got, want)
		}
	}
	if n := strings.Count(strings.Join(env, "\n"), EnvRole+"="); n != 1 {
		t.Errorf("%d values of %s in %q: the inherited one stays", n, EnvRole, env)
	}
	wantMetric(t, g.mon, `etcdlead_notify_total{role="leader",result="ok"} 2`)
	wantMetric(t, g.mon, `etcdlead_notify_total{role="stopped",result="ok"} 1`)
}

// twoTermsHooked is a run that wins two terms, with a command told of its
// roles that waits for its release each time.
func twoTermsHooked(t *testing.T) (*fakeHook, *rig) {
	t.Helper()
	h := newHook(t, true)
	g := newRig(t, notifyConfig(h), func(g *rig) []func(int) (Leadership, error) {
		h.j = g.j
		g.keepers.obeys = true
		return []func(int) (Leadership, error){g.wins(), g.wins()}
	})
	return h, g
}

// A command that hangs holds up nothing of the terms: the step down, the
// revoke, the next term's child, its stop all go on while it runs. The
// roles set meanwhile wait, the newest replacing the others, and the run
// ends only once the last has been told.
func TestNotifyHangingCommandDelaysNoTerm(t *testing.T) {
	h, g := twoTermsHooked(t)
	g.keepers.child(t, 0)
	g.j.waitFor(t, "hook leader", 1)
	g.terms[0].lose <- campaign.ErrResigned
	g.keepers.child(t, 1)
	g.sigs <- syscall.SIGTERM
	g.j.waitFor(t, "child exited", 2)
	if g.j.has("hook leader done") {
		t.Fatalf("the command ended before it was let go: %s", g.j)
	}
	g.j.inOrder(t, "hook leader", "stop SIGTERM", "revoke", "campaign", "child started", "stop SIGTERM", "child exited")
	g.j.waitFor(t, "set stopped", 1)
	select {
	case o := <-g.out:
		t.Fatalf("the run ended (%v) while the command still ran", o)
	default:
	}
	h.release <- struct{}{}
	h.release <- struct{}{}
	o := g.outcome(t)
	wantOutcome(t, o, Stopped, 143)
	h.wantTold(t, "leader 11 elected", "stopped 12 stopped")
	wantMetric(t, g.mon, `etcdlead_notify_total{role="follower",result="replaced"} 1`)
	wantMetric(t, g.mon, `etcdlead_notify_total{role="leader",result="replaced"} 1`)
}

// A leader that loses and wins again, over and over, while the command
// runs: told in order, never two runs at once, and told last the role it
// has now, with that term's fencing token.
func TestNotifyFlappingEndsInCurrentRole(t *testing.T) {
	const flaps = 5
	h := newHook(t, true)
	g := newRig(t, notifyConfig(h), func(g *rig) []func(int) (Leadership, error) {
		h.j = g.j
		g.keepers.obeys = true
		var w []func(int) (Leadership, error)
		for range flaps + 2 {
			w = append(w, g.wins())
		}
		// The last term is won only once follower is being told, so that
		// it cannot replace follower before it ran.
		last := w[flaps+1]
		w[flaps+1] = func(n int) (Leadership, error) {
			g.j.await("hook follower")
			return last(n)
		}
		return w
	})
	g.j.waitFor(t, "hook leader", 1)
	for i := range flaps {
		g.keepers.child(t, i)
		g.terms[i].lose <- campaign.ErrResigned
	}
	g.j.waitFor(t, "set leader", flaps+1)
	g.j.waitFor(t, "hook leader", 1)
	h.release <- struct{}{}
	g.j.waitFor(t, "hook leader", 2)
	h.release <- struct{}{}
	g.j.waitFor(t, "hook leader done", 2)
	h.wantTold(t, "leader 11 elected", "leader 16 elected")
	// Lost and won again while that run was under way: told again.
	g.terms[flaps].lose <- campaign.ErrResigned
	g.j.waitFor(t, "set leader", flaps+2)
	g.sigs <- syscall.SIGTERM
	g.j.waitFor(t, "set stopped", 1)
	h.release <- struct{}{}
	h.release <- struct{}{}
	wantOutcome(t, g.outcome(t), Stopped, 143)
	h.wantTold(t, "leader 11 elected", "leader 16 elected", "follower 16 resigned", "stopped 17 stopped")
	wantMetric(t, g.mon, `etcdlead_notify_total{role="follower",result="replaced"} 5`)
	wantMetric(t, g.mon, `etcdlead_notify_total{role="leader",result="replaced"} 5`)
	wantMetric(t, g.mon, `etcdlead_notify_total{role="leader",result="ok"} 2`)
}

// A term won and lost while the command was told follower tells it
// nothing: it was never told leader, so there is nothing to undo.
func TestNotifyUnheardTermTellsNothing(t *testing.T) {
	h, g := twoTermsHooked(t)
	g.keepers.child(t, 0)
	h.release <- struct{}{}
	g.j.waitFor(t, "hook leader done", 1)
	g.terms[0].lose <- campaign.ErrKeyDeleted
	g.j.waitFor(t, "hook follower", 1)
	g.keepers.child(t, 1)
	g.terms[1].lose <- campaign.ErrKeyDeleted
	g.j.waitFor(t, "set follower", 2)
	g.sigs <- syscall.SIGTERM
	g.j.waitFor(t, "set stopped", 1)
	h.release <- struct{}{}
	h.release <- struct{}{}
	wantOutcome(t, g.outcome(t), Stopped, 0)
	h.wantTold(t, "leader 11 elected", "follower 11 key-deleted", "stopped  stopped")
	wantMetric(t, g.mon, `etcdlead_notify_total{role="leader",result="replaced"} 1`)
}

// A candidate that never led tells nothing: not at its start, not when a
// campaign fails, not at its end. There is nothing to undo.
func TestNotifyNothingUntilLed(t *testing.T) {
	h := newHook(t, false)
	g := newRig(t, notifyConfig(h), func(g *rig) []func(int) (Leadership, error) {
		h.j = g.j
		return []func(int) (Leadership, error){fails(campaign.ErrKeyDeleted)}
	})
	g.j.waitFor(t, "campaign", 2)
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), Stopped, 0)
	h.wantTold(t)
}

// --once: leader, then stopped when the command ends, for the term that
// ended with the run; no follower between. (A command that ends before
// leader was told replaces it: the hook hears nothing, the test waits.)
func TestNotifyOnce(t *testing.T) {
	h := newHook(t, false)
	cfg := notifyConfig(h)
	cfg.Once = true
	g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
		h.j = g.j
		return []func(int) (Leadership, error){g.wins()}
	})
	c := g.keepers.child(t, 0)
	g.j.waitFor(t, "hook leader", 1)
	c.exit(0, supervisor.ReasonExited)
	wantOutcome(t, g.outcome(t), ChildExited, 0)
	h.wantTold(t, "leader 11 elected", "stopped 11 child-exited")
}

// A restart in place keeps the term: the command is told leader once.
func TestNotifyRestartInPlaceKeepsLeader(t *testing.T) {
	h := newHook(t, false)
	cfg := notifyConfig(h)
	p := probe("health")
	cfg.Health = healthConfig(p, true)
	g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
		h.j, p.j = g.j, g.j
		g.keepers.obeys = true
		return []func(int) (Leadership, error){g.wins()}
	})
	g.keepers.child(t, 0)
	g.j.waitFor(t, "hook leader", 1)
	p.answer(t, false)
	p.answer(t, false)
	g.keepers.child(t, 1).exit(0, supervisor.ReasonExited)
	wantOutcome(t, g.outcome(t), ChildExited, 0)
	h.wantTold(t, "leader 11 elected", "stopped 11 child-exited")
}

// A run that fails or times out is one warning line, with what the
// command wrote, and is counted; the next role is told all the same.
func TestNotifyFailuresLoggedAndCounted(t *testing.T) {
	h := newHook(t, false)
	h.answer = func(role string) health.Result {
		if role == ops.HookLeader {
			return health.Result{Code: 3, Output: "no kubectl\nhere\n"}
		}
		return health.Result{Code: -1, Err: "timed out after 1s", TimedOut: true}
	}
	g := newRig(t, notifyConfig(h), func(g *rig) []func(int) (Leadership, error) {
		h.j = g.j
		return []func(int) (Leadership, error){g.wins()}
	})
	c := g.keepers.child(t, 0)
	g.j.waitFor(t, "hook leader", 1)
	c.exit(0, supervisor.ReasonExited)
	wantOutcome(t, g.outcome(t), ChildExited, 0)
	h.wantTold(t, "leader 11 elected", "stopped 11 child-exited")
	log := g.log.String()
	if strings.Count(log, "--notify failed") != 2 || !strings.Contains(log, "no kubectl") || !strings.Contains(log, "failed (3)") ||
		!strings.Contains(log, "timed out after 1s") {
		t.Errorf("want a warning for each run, with its output:\n%s", log)
	}
	wantMetric(t, g.mon, `etcdlead_notify_total{role="leader",result="failed"} 1`)
	wantMetric(t, g.mon, `etcdlead_notify_total{role="stopped",result="timeout"} 1`)
}

// A real command: run by /bin/sh with the role as $1, under a keeper, and
// killed with every process it started at its timeout; a process it left
// running when it exited is gone too. The notifier's close returns only
// once all of that is over.
func TestNotifyCommandContained(t *testing.T) {
	dir := t.TempDir()
	told, pids, started := filepath.Join(dir, "told"), filepath.Join(dir, "pids"), filepath.Join(dir, "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	shell := fmt.Sprintf(`echo "$1 $ETCDLEAD_ROLE $ETCDLEAD_REV $ETCDLEAD_REASON" >> %[1]s
sh -c 'trap "" TERM; while :; do sleep 1; done' & echo $! >> %[2]s
[ "$1" = leader ] && echo >> %[3]s && exec sleep 600
exit 0`, told, pids, started)
	var logs logLines
	l, _ := campaign.NewLayout("p/", "e")
	r := &Runner{cfg: Config{Campaign: campaign.Config{Layout: l, ID: "c1"}, Notify: &Notify{Command: health.Command{
		Shell: shell, Timeout: 500 * time.Millisecond, Env: os.Environ(),
		KillTimeout: 200 * time.Millisecond, FenceMargin: 100 * time.Millisecond, Log: hclog.NewNullLogger()}}},
		mon: ops.New("e", "c1", "test", 10*time.Second, nil), log: hclog.New(&hclog.LoggerOptions{Output: &logs})}
	n := r.startNotifier()
	n.set(ops.HookLeader, ops.ReasonElected, 7)
	// Stopped is set only once leader runs, so it cannot replace it.
	if _, err := os.ReadFile(started); err != nil {
		t.Fatal(err)
	}
	n.close("stopped")

	b, err := os.ReadFile(told)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "leader leader 7 elected\nstopped stopped 7 stopped\n"; got != want {
		t.Errorf("told %q, want %q", got, want)
	}
	b, err = os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	left := strings.Fields(string(b))
	if len(left) != 2 {
		t.Fatalf("pids %q, want one background process of each run", left)
	}
	for _, s := range left {
		pid, _ := strconv.Atoi(s)
		if !proctest.Gone(pid) {
			proctest.KillAtCleanup(t, pid)
			t.Errorf("process %d, started by the command, outlived it", pid)
		}
	}
	if l := logs.String(); !strings.Contains(l, "--notify failed") || !strings.Contains(l, "timed out after 500ms") {
		t.Errorf("no warning of the timeout in the log:\n%s", l)
	}
	wantMetric(t, r.mon, `etcdlead_notify_total{role="leader",result="timeout"} 1`)
	wantMetric(t, r.mon, `etcdlead_notify_total{role="stopped",result="ok"} 1`)
}
