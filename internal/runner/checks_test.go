package runner

import (
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/health"
	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/supervisor"
)

// probe is a fakeProbe whose journal newRig's setup sets.
func probe(name string) *fakeProbe {
	return &fakeProbe{name: name, answers: make(chan health.Result)}
}

// A candidate whose --eligible-cmd fails does not campaign: under
// --no-wait it ends at once as not leader; else it checks again every
// interval and campaigns once the check passes.
func TestIneligibleDoesNotCampaign(t *testing.T) {
	t.Run("no-wait", func(t *testing.T) {
		cfg := baseConfig()
		cfg.Campaign.NoWait = true
		p := probe("eligible")
		cfg.Eligible = &Check{Probe: p, Interval: time.Millisecond}
		g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
			p.j = g.j
			return []func(int) (Leadership, error){g.wins()}
		})
		p.answer(t, false)
		wantOutcome(t, g.outcome(t), NotLeader, 0)
		if g.j.has("campaign") {
			t.Errorf("an ineligible candidate campaigned: %s", g.j)
		}
	})
	t.Run("wait", func(t *testing.T) {
		cfg := baseConfig()
		p := probe("eligible")
		cfg.Eligible = &Check{Probe: p, Interval: time.Millisecond}
		g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
			p.j = g.j
			return nil
		})
		p.answer(t, false)
		// Not eligible, it still asks etcd whether it answers: its health
		// (and systemd's READY=1 and watchdog) rest on that.
		g.j.waitFor(t, "ping", 1)
		p.answer(t, false)
		if g.j.has("campaign") {
			t.Errorf("an ineligible candidate campaigned: %s", g.j)
		}
		p.answer(t, true)
		g.j.waitFor(t, "campaign", 1)
		// While it waits in the queue, a failing check takes it out.
		p.answer(t, false)
		g.j.waitFor(t, "campaign cancelled", 1)
		p.answer(t, true)
		g.j.waitFor(t, "campaign", 2)
		g.sigs <- syscall.SIGTERM
		wantOutcome(t, g.outcome(t), Stopped, 0)
	})
}

// A leader whose --eligible-cmd starts failing steps down in the
// promise's order: the child, then the check, gone before the revoke; it
// campaigns again only once the check passes.
func TestIneligibleLeaderStepsDown(t *testing.T) {
	cfg := baseConfig()
	p := probe("eligible")
	cfg.Eligible = &Check{Probe: p, Interval: time.Millisecond}
	g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
		p.j = g.j
		g.keepers.obeys = true
		return []func(int) (Leadership, error){g.wins()}
	})
	p.answer(t, true)
	g.keepers.child(t, 0)
	p.answer(t, false)
	g.j.waitFor(t, "revoke", 1)
	g.j.inOrder(t, "stop SIGTERM", "child exited", "revoke")
	g.j.settledBefore(t, "eligible check", "eligible done", "end")
	p.answer(t, true)
	g.j.waitFor(t, "campaign", 2)
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), Stopped, 0)
}

func healthConfig(p *fakeProbe, restart bool) *HealthCheck {
	return &HealthCheck{Check: Check{Probe: p, Interval: time.Millisecond}, Retries: 2, Restart: restart}
}

// An unhealthy command (Retries failures in a row) with a candidate
// waiting: the leader stops it, its checks end, the term is revoked, and
// the candidate sits out before it queues again, unless the election has
// no candidate left, when it campaigns at once.
func TestUnhealthyLeaderStepsDownForWaiter(t *testing.T) {
	cfg := baseConfig()
	p := probe("health")
	cfg.Health = healthConfig(p, false)
	g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
		p.j = g.j
		g.keepers.obeys = true
		g.camp.vacant = true
		w := g.wins()
		g.terms[0].waiting = true
		return []func(int) (Leadership, error){w}
	})
	g.keepers.child(t, 0)
	p.answer(t, true)
	p.answer(t, false)
	p.answer(t, false)
	g.j.waitFor(t, "campaign", 2)
	g.j.inOrder(t, "waiting?", "stop SIGTERM", "child exited", "revoke", "await vacant", "campaign")
	g.j.settledBefore(t, "health check", "health done", "end")
	if n := g.j.count("child started"); n != 1 {
		t.Errorf("%d children started in the term, want 1", n)
	}
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), Stopped, 0)
}

// With no candidate waiting, stepping down would leave the election
// without a leader: the command is restarted in place, in the same term
// (no revoke), after a damping delay; --health-action=restart does so
// whoever waits.
func TestUnhealthyCommandRestartedInPlace(t *testing.T) {
	for _, c := range []struct {
		name             string
		restart, waiting bool
	}{{"nobody waits", false, false}, {"action restart", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := baseConfig()
			p := probe("health")
			cfg.Health = healthConfig(p, c.restart)
			g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
				p.j = g.j
				g.keepers.obeys = true
				w := g.wins()
				g.terms[0].waiting = c.waiting
				return []func(int) (Leadership, error){w}
			})
			g.keepers.child(t, 0)
			p.answer(t, false)
			p.answer(t, false)
			g.keepers.child(t, 1)
			g.j.inOrder(t, "stop SIGTERM", "child exited", "child started")
			if g.j.has("revoke") {
				t.Errorf("the term was revoked for a restart in place: %s", g.j)
			}
			if asked := g.j.has("waiting?"); asked == c.restart {
				t.Errorf("asked whether a candidate waits: %v, under --health-action=restart %v", asked, c.restart)
			}
			// The new command's keeper hears the term's renewals: once it
			// was told the term's deadline at its start (the fake term's
			// is an hour), a renewal goes to it, never to the old one.
			g.j.waitFor(t, "child 1 deadline 1h0m0s", 1)
			g.terms[0].renew <- time.Minute
			g.j.waitFor(t, "child 1 deadline 1m0s", 1)
			if g.j.has("child 0 deadline 1m0s") {
				t.Errorf("a renewal after the restart went to the old command's keeper: %s", g.j)
			}
			// The new command is checked afresh.
			p.answer(t, true)
			g.keepers.child(t, 1).exit(0, supervisor.ReasonExited)
			wantOutcome(t, g.outcome(t), ChildExited, 0)
			g.j.settledBefore(t, "health check", "health done", "end")
		})
	}
}

// A command that runs once (--once, --run-id) is never restarted in place:
// unhealthy, it is stopped and the term ends, under --once as a lost term.
func TestUnhealthyOnceCommandNotRestarted(t *testing.T) {
	cfg := baseConfig()
	cfg.Once = true
	p := probe("health")
	cfg.Health = healthConfig(p, false)
	g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
		p.j = g.j
		g.keepers.obeys = true
		return []func(int) (Leadership, error){g.wins()}
	})
	g.keepers.child(t, 0)
	p.answer(t, false)
	p.answer(t, false)
	wantOutcome(t, g.outcome(t), LostOnce, 143)
	if n := g.j.count("child started"); n != 1 {
		t.Errorf("%d commands started under --once, want 1: %s", n, g.j)
	}
	g.j.inOrder(t, "stop SIGTERM", "child exited", "revoke")
}

// A verdict about a command restarted since is stale: the term's loop
// must not restart the new command for it.
func TestStaleVerdict(t *testing.T) {
	j := newJournal()
	p := probe("health")
	p.j = j
	r := &Runner{cfg: Config{Health: healthConfig(p, false)}, mon: ops.New("e", "c1", "test", time.Second, nil), log: hclog.NewNullLogger()}
	ft := &fakeTerm{j: j, n: 1, lose: make(chan error, 1)}
	c := r.startTermChecks(t.Context(), ft.term())
	defer c.stop()
	unhealthy := func() verdict {
		t.Helper()
		p.answer(t, false)
		p.answer(t, false)
		select {
		case v := <-c.verdicts:
			return v
		case <-time.After(safety):
			t.Fatalf("no verdict; events: %s", j)
			return verdict{}
		}
	}
	old := unhealthy()
	if !c.current(old) {
		t.Fatal("the verdict about the command that runs is not current")
	}
	c.stopHealth()
	// The old loop's check under way ends before the new loop asks: an
	// answer meant for the new one must not reach it.
	j.waitFor(t, "health done", j.count("health check"))
	c.startHealth() // the command restarted in place
	if c.current(old) {
		t.Error("a verdict about the command before the restart counts for the new one")
	}
	if v := unhealthy(); !c.current(v) {
		t.Error("the new command's own verdict is not current")
	}
}
