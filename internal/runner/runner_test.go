package runner

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/supervisor"
)

// A child that ends by itself ends the run with its status, and the term
// is revoked only after it is gone. The child learns its term.
func TestChildExitEndsRunThenRevoke(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) { return []func(int) (Leadership, error){g.wins()} })
	g.keepers.child(t, 0).exit(3, supervisor.ReasonExited)
	wantOutcome(t, g.outcome(t), ChildExited, 3)
	g.j.before(t, "child exited", "end")
	// The end goes first: the next candidate does not wait for Lead's
	// return.
	g.j.before(t, "end", "hold returned")
	g.j.before(t, "hold returned", "revoke")
	g.j.before(t, "keeper gone", "revoke")
	want := []string{"ETCDLEAD_NAME=e", "ETCDLEAD_KEY=p/e/1", "ETCDLEAD_REV=11", "ETCDLEAD_LEASE=1",
		"ETCDLEAD_ID=c1", "ETCDLEAD_ENDPOINTS=127.0.0.1:2379", "ETCDLEAD_SLOT=0", "ETCDLEAD_SLOT_REV=11"}
	if got := g.keepers.env[0]; !slices.Equal(got, want) {
		t.Errorf("child env %q, want %q", got, want)
	}
}

// The revoke waits for the keeper, which exits after its report: the lease
// goes last, once nothing of the term is left.
func TestRevokeWaitsForTheKeeper(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) {
		g.keepers.lingers = true
		return []func(int) (Leadership, error){g.wins()}
	})
	c := g.keepers.child(t, 0)
	c.exit(0, supervisor.ReasonExited)
	g.j.waitFor(t, "await keeper", 1)
	if g.j.has("revoke") {
		t.Fatal("revoked while the keeper runs")
	}
	c.keeperExits()
	wantOutcome(t, g.outcome(t), ChildExited, 0)
	g.j.inOrder(t, "child exited", "end", "await keeper", "keeper gone", "revoke")
}

// A keeper that does not exit delays the revoke by keeperExitWait only.
func TestRevokeWithoutAKeeperThatStays(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) {
		g.keepers.lingers = true
		return []func(int) (Leadership, error){g.wins()}
	})
	g.keepers.child(t, 0).exit(0, supervisor.ReasonExited)
	wantOutcome(t, g.outcome(t), ChildExited, 0)
	g.j.inOrder(t, "child exited", "end", "await keeper", "revoke")
	if g.j.has("keeper gone") {
		t.Fatal("the keeper was never let go")
	}
}

// A lost term stops the child before anything else, revokes after the
// child is gone, and campaigns again.
func TestLostTermStopsChildFirstThenCampaignsAgain(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) { return []func(int) (Leadership, error){g.wins()} })
	c := g.keepers.child(t, 0)
	g.terms[0].lose <- campaign.ErrKeyDeleted
	g.j.waitFor(t, "stop SIGTERM", 1)
	g.j.before(t, "stop SIGTERM", "revoke")
	c.exit(143, supervisor.ReasonStopped)
	g.j.waitFor(t, "campaign", 2)
	g.j.before(t, "child exited", "end")
	g.j.before(t, "revoke", "campaign cancelled")
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), Stopped, 0)
}

// The log names a term's end for what it was: an operator's resign is a
// step down on request, not a loss; a deleted key is a loss.
func TestTermEndNamedInLog(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) {
		g.keepers.obeys = true
		return []func(int) (Leadership, error){g.wins(), g.wins()}
	})
	g.keepers.child(t, 0)
	g.terms[0].lose <- campaign.ErrResigned
	g.keepers.child(t, 1)
	resign := g.log.String()
	if !strings.Contains(resign, "[INFO]  stepped down on request; child stopping") || strings.Contains(resign, "leadership lost") {
		t.Errorf("a resign is not logged as a step down on request:\n%s", resign)
	}
	g.terms[1].lose <- campaign.ErrKeyDeleted
	g.j.waitFor(t, "campaign", 3)
	lost := strings.TrimPrefix(g.log.String(), resign)
	if !strings.Contains(lost, "[WARN]  leadership lost; child stopping") {
		t.Errorf("a deleted key is not logged as leadership lost:\n%s", lost)
	}
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), Stopped, 0)
}

// With --holders N > 1 the log names the term a holder's: its start with
// the slot, its loss as a lost slot.
func TestHolderNamedInLog(t *testing.T) {
	cfg := baseConfig()
	cfg.Campaign.Holders = 2
	g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
		g.keepers.obeys = true
		return []func(int) (Leadership, error){g.wins(), g.wins()}
	})
	g.keepers.child(t, 0)
	g.terms[0].lose <- campaign.ErrKeyDeleted
	g.keepers.child(t, 1)
	log := g.log.String()
	if !strings.Contains(log, "child started as holder") || !strings.Contains(log, "slot=0") ||
		!strings.Contains(log, "[WARN]  holder lost its slot; child stopping") || strings.Contains(log, "leadership lost") {
		t.Errorf("a holder's term is not logged as a holder's:\n%s", log)
	}
	g.terms[1].lose <- campaign.ErrKeyDeleted
	g.j.waitFor(t, "campaign", 3)
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), Stopped, 0)
}

// Under --once, a lost term ends the run with LostOnce.
func TestLostTermUnderOnce(t *testing.T) {
	cfg := baseConfig()
	cfg.Once = true
	g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
		g.keepers.obeys = true
		return []func(int) (Leadership, error){g.wins()}
	})
	g.keepers.child(t, 0)
	g.terms[0].lose <- campaign.ErrResigned
	wantOutcome(t, g.outcome(t), LostOnce, 143)
	g.j.before(t, "stop SIGTERM", "revoke")
}

// A permanent refusal while leading ends the run: campaigning again would
// only be refused again.
func TestRefusedWhileLeading(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) {
		g.keepers.obeys = true
		return []func(int) (Leadership, error){g.wins()}
	})
	g.keepers.child(t, 0)
	g.terms[0].lose <- status.Error(codes.PermissionDenied, "no")
	wantOutcome(t, g.outcome(t), Refused, 0)
}

// The first stop signal stops the child with that signal; the second
// kills its group; the run ends with the child's status.
func TestStopSignalsWhileLeading(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) { return []func(int) (Leadership, error){g.wins()} })
	g.keepers.child(t, 0)
	g.sigs <- syscall.SIGINT
	g.j.waitFor(t, "stop SIGINT", 1)
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), Stopped, 137)
	g.j.before(t, "kill", "revoke")
	if s := g.j.String(); slices.Contains(g.j.events, "stop SIGTERM") {
		t.Errorf("the second stop signal was sent on, not turned into a kill: %s", s)
	}
}

// Forwarded signals reach the child; job-control signals do not.
func TestSignalsForwardedOrIgnoredWhileLeading(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) { return []func(int) (Leadership, error){g.wins()} })
	c := g.keepers.child(t, 0)
	g.sigs <- syscall.SIGTSTP
	g.sigs <- syscall.SIGHUP
	g.j.waitFor(t, "signal SIGHUP", 1)
	c.exit(0, supervisor.ReasonExited)
	wantOutcome(t, g.outcome(t), ChildExited, 0)
	if slices.Contains(g.j.events, "signal SIGTSTP") {
		t.Errorf("SIGTSTP reached the child: %s", g.j)
	}
}

// A stop signal while campaigning ends the campaign and the run with 0.
func TestStopSignalWhileCampaigning(t *testing.T) {
	g := newRig(t, baseConfig(), func(*rig) []func(int) (Leadership, error) { return nil })
	g.j.waitFor(t, "campaign", 1)
	g.sigs <- syscall.SIGHUP // no child: ignored
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), Stopped, 0)
	g.j.waitFor(t, "campaign cancelled", 1)
}

// --timeout stops the child and ends the run with TimedOut.
func TestTimeoutStopsChild(t *testing.T) {
	cfg := baseConfig()
	cfg.Timeout = 1 // fires at once
	g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
		g.keepers.obeys = true
		return []func(int) (Leadership, error){g.wins()}
	})
	g.j.waitFor(t, "stop SIGTERM", 1)
	wantOutcome(t, g.outcome(t), TimedOut, 143)
}

// A child the keeper refused to start past its fence point loses the
// term, not the run: the term is revoked and the campaign runs again.
func TestPastFenceCampaignsAgain(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) {
		g.keepers.startErr = supervisor.ErrPastFence
		return []func(int) (Leadership, error){g.wins()}
	})
	g.j.waitFor(t, "campaign", 2)
	g.j.before(t, "start failed", "revoke")
	g.j.before(t, "revoke", "campaign cancelled")
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), Stopped, 0)
}

// A command that cannot be executed ends the run with its code.
func TestExecFailure(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) {
		g.keepers.startErr = &supervisor.ExecError{Code: 127, Msg: "gone"}
		return []func(int) (Leadership, error){g.wins()}
	})
	wantOutcome(t, g.outcome(t), ExecFailed, 127)
	g.j.waitFor(t, "revoke", 1)
}

// --restart=always campaigns again after the child exits.
func TestRestartAlways(t *testing.T) {
	cfg := baseConfig()
	cfg.Restart = RestartAlways
	g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
		return []func(int) (Leadership, error){g.wins(), g.wins()}
	})
	g.keepers.child(t, 0).exit(0, supervisor.ReasonExited)
	c := g.keepers.child(t, 1)
	g.j.inOrder(t, "child started", "child exited", "revoke", "child started")
	g.sigs <- syscall.SIGTERM
	g.j.waitFor(t, "stop SIGTERM", 1)
	c.exit(143, supervisor.ReasonStopped)
	wantOutcome(t, g.outcome(t), Stopped, 143)
}

// Ctrl-C on the terminal kills the child with SIGINT: an interactive run
// then ends with 130 instead of starting the command again. An exit status
// of 130 is no Ctrl-C, and neither is a SIGINT without a terminal.
func TestRestartAlwaysStopsOnCtrlC(t *testing.T) {
	for _, c := range []struct {
		name        string
		interactive bool
		res         supervisor.Result
		restarts    bool
	}{
		{"ctrl-c", true, supervisor.Result{Code: 130, Reason: supervisor.ReasonExited, Signaled: true}, false},
		{"exit 130", true, supervisor.Result{Code: 130, Reason: supervisor.ReasonExited}, true},
		{"sigint, no terminal", false, supervisor.Result{Code: 130, Reason: supervisor.ReasonExited, Signaled: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Restart = RestartAlways
			cfg.Interactive = c.interactive
			g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
				return []func(int) (Leadership, error){g.wins(), g.wins()}
			})
			g.keepers.child(t, 0).end(c.res)
			if !c.restarts {
				wantOutcome(t, g.outcome(t), Stopped, 130)
				return
			}
			second := g.keepers.child(t, 1)
			g.sigs <- syscall.SIGTERM
			g.j.waitFor(t, "stop SIGTERM", 1)
			second.exit(143, supervisor.ReasonStopped)
			wantOutcome(t, g.outcome(t), Stopped, 143)
		})
	}
}

// How failed campaigns end the run.
func TestCampaignFailures(t *testing.T) {
	refused := status.Error(codes.Unauthenticated, "bad password")
	for _, c := range []struct {
		name   string
		noWait bool
		err    error
		want   Kind
	}{
		{"not leader", true, campaign.ErrNotLeader, NotLeader},
		{"refused", false, refused, Refused},
		{"unreachable, --no-wait", true, errors.New("dial"), Unreachable},
		{"unreachable", false, campaign.ErrUnreachable, Unreachable},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Campaign.NoWait = c.noWait
			g := newRig(t, cfg, func(*rig) []func(int) (Leadership, error) {
				return []func(int) (Leadership, error){fails(c.err)}
			})
			o := g.outcome(t)
			if o.Kind != c.want || o.Err == nil {
				t.Fatalf("outcome %+v, want %v with a message", o, c.want)
			}
		})
	}
}

// --hold-at-least keeps the term after the child ended, until a stop
// signal (or the time) ends the hold; only then is the term revoked.
func TestHoldAtLeastKeepsTermUntilStopped(t *testing.T) {
	cfg := baseConfig()
	cfg.HoldAtLeast = safety * 10
	g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) { return []func(int) (Leadership, error){g.wins()} })
	g.keepers.child(t, 0).exit(0, supervisor.ReasonExited)
	g.sigs <- syscall.SIGHUP // no child: ignored, the hold goes on
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), ChildExited, 0)
	g.j.before(t, "child exited", "end")
	g.j.before(t, "hold returned", "revoke")
}

// A backoff never outlasts --wait: a campaign that fails late in the wait
// must not push the run's end past it by a backoff drawn in full
// (TestUnreachableRetriedUntilWaitEnds in internal/e2e ran past its bound
// when it did).
func TestBackoffEndsWithWait(t *testing.T) {
	cfg := baseConfig()
	cfg.Wait = 100 * time.Millisecond // below the first backoff's least draw
	g := newRig(t, cfg, func(*rig) []func(int) (Leadership, error) {
		return []func(int) (Leadership, error){fails(errors.New("transient"))}
	})
	if o := g.outcome(t); o.Kind != NotLeader && o.Kind != Unreachable {
		t.Fatalf("outcome %+v, want the wait's end", o)
	}
	m := regexp.MustCompile(`backing off: delay=(\S+) wait_left=`).FindAllStringSubmatch(g.log.String(), -1)
	if len(m) == 0 {
		t.Fatalf("no backoff logged:\n%s", g.log)
	}
	for _, x := range m {
		d, err := time.ParseDuration(x[1])
		if err != nil || d > cfg.Wait {
			t.Fatalf("backed off %s with --wait %s:\n%s", x[1], cfg.Wait, g.log)
		}
	}
}

// A resign is not a failure: the candidate queues again at once, without
// the backoff, whether it led (its child stopped first) or still headed the
// queue. A lost term, by contrast, backs off.
func TestResignQueuesAgainAtOnce(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) {
		g.keepers.obeys = true
		return []func(int) (Leadership, error){g.wins(), fails(campaign.ErrResigned), g.wins()}
	})
	g.keepers.child(t, 0)
	g.terms[0].lose <- campaign.ErrResigned
	g.keepers.child(t, 1) // after the resign while leading, then the one before leading
	if log := g.log.String(); strings.Contains(log, "backing off") {
		t.Errorf("backed off after a resign:\n%s", log)
	}
	g.j.inOrder(t, "stop SIGTERM", "revoke", "campaign", "campaign", "child started")
	g.terms[1].lose <- campaign.ErrKeyDeleted
	g.j.waitFor(t, "campaign", 4)
	if log := g.log.String(); !strings.Contains(log, "backing off") {
		t.Errorf("no backoff after a lost term:\n%s", log)
	}
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), Stopped, 0)
}

// With --run-id-retry, a run that did not succeed takes its record back
// once the child is gone, so the firing may run again; a run that
// succeeded keeps it. A term lost before its child started takes its
// record back whatever the options: no child ran.
func TestRunRecordTakenBack(t *testing.T) {
	for _, c := range []struct {
		name   string
		retry  bool
		code   int
		forget bool
	}{
		{"failed, retry", true, 3, true},
		{"failed, no retry", false, 3, false},
		{"succeeded, retry", true, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Campaign.RunID, cfg.RunRetry = "f1", c.retry
			g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) { return []func(int) (Leadership, error){g.wins()} })
			g.keepers.child(t, 0).exit(c.code, supervisor.ReasonExited)
			wantOutcome(t, g.outcome(t), ChildExited, c.code)
			if got := slices.Contains(g.j.events, "forget run"); got != c.forget {
				t.Fatalf("record taken back: %v, want %v; events: %s", got, c.forget, g.j)
			}
			if c.forget {
				g.j.before(t, "child exited", "forget run")
			}
			if env := g.keepers.env[0]; !slices.Contains(env, "ETCDLEAD_RUN_ID=f1") {
				t.Errorf("child env %q lacks the run id", env)
			}
		})
	}
	t.Run("past fence", func(t *testing.T) {
		cfg := baseConfig()
		cfg.Campaign.RunID = "f1"
		g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
			g.keepers.startErr = supervisor.ErrPastFence
			return []func(int) (Leadership, error){g.wins()}
		})
		g.j.waitFor(t, "forget run", 1)
		g.j.before(t, "start failed", "forget run")
		g.sigs <- syscall.SIGTERM
		wantOutcome(t, g.outcome(t), Stopped, 0)
	})
}

// A firing that ran already ends the run as not leader: the conflict
// code, without a child.
func TestRunDoneIsNotLeader(t *testing.T) {
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) {
		return []func(int) (Leadership, error){fails(fmt.Errorf("campaign: %w", campaign.ErrRunDone))}
	})
	wantOutcome(t, g.outcome(t), NotLeader, 0)
}

// A term won just as a stop signal ends the campaign runs no command, so
// its record of the run id is taken back before its revoke.
func TestAbandonedTermForgetsItsRun(t *testing.T) {
	cfg := baseConfig()
	cfg.Campaign.RunID = "f1"
	g := newRig(t, cfg, func(g *rig) []func(int) (Leadership, error) {
		g.camp.lateWin = &fakeTerm{j: g.j, n: 1, lose: make(chan error, 1)}
		return nil
	})
	g.j.waitFor(t, "campaign", 1)
	g.sigs <- syscall.SIGTERM
	wantOutcome(t, g.outcome(t), Stopped, 0)
	g.j.inOrder(t, "campaign cancelled", "forget run", "revoke")
	if g.j.has("child started") {
		t.Errorf("a command started: %s", g.j)
	}
}

// A lost term is no failure of the candidate's: each one is followed by the
// first backoff, not by one grown over the terms lost before it, which
// after an etcd fault that takes every candidate's term, fault after fault,
// would leave the election leaderless for its length.
func TestLostTermsDoNotGrowTheBackoff(t *testing.T) {
	const rounds = 5
	g := newRig(t, baseConfig(), func(g *rig) []func(int) (Leadership, error) {
		g.keepers.obeys = true
		var c []func(int) (Leadership, error)
		for range rounds + 1 {
			c = append(c, g.wins())
		}
		return c
	})
	for i := range rounds {
		g.keepers.child(t, i)
		g.terms[i].lose <- campaign.ErrKeyDeleted
	}
	g.keepers.child(t, rounds)
	g.sigs <- syscall.SIGTERM
	if o := g.outcome(t); o.Kind != Stopped {
		t.Fatalf("outcome %+v, want stopped", o)
	}
	m := regexp.MustCompile(`backing off: delay=(\S+)`).FindAllStringSubmatch(g.log.String(), -1)
	if len(m) != rounds {
		t.Fatalf("%d backoffs logged, want %d:\n%s", len(m), rounds, g.log)
	}
	first := newBackoff(baseConfig().Campaign.Timing.TTL)
	most := time.Duration(float64(first.InitialInterval) * (1 + first.RandomizationFactor))
	for _, x := range m {
		if d, err := time.ParseDuration(x[1]); err != nil || d > most {
			t.Errorf("backed off %s after a lost term, want at most the first backoff's %s:\n%s", x[1], most, g.log)
		}
	}
}

// The backoff is capped at half the TTL, up to 5 s: a candidate that backs
// off is out of the queue.
func TestBackoffCap(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{2 * time.Second, time.Second},
		{6 * time.Second, 3 * time.Second},
		{15 * time.Second, 5 * time.Second},
		{time.Hour, 5 * time.Second},
	} {
		b := newBackoff(c.ttl)
		most := time.Duration(float64(c.want) * (1 + b.RandomizationFactor))
		for range 40 {
			if d := b.NextBackOff(); d > most {
				t.Errorf("TTL %s: backoff %s, want at most %s", c.ttl, d, most)
				break
			}
		}
		if b.MaxInterval != c.want {
			t.Errorf("TTL %s: cap %s, want %s", c.ttl, b.MaxInterval, c.want)
		}
	}
}
