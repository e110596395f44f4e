package keeper

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/fence"
)

const ms = time.Millisecond

func TestFenceSignalsThenKillsBeforeDeadline(t *testing.T) {
	g := &groupState{fence: fence.Fence{Deadline: 10_000 * ms, KillTimeout: 2000 * ms, Margin: 500 * ms}, killSignal: syscall.SIGTERM}
	for _, now := range []time.Duration{0, 7000 * ms, 7499 * ms} {
		if out := g.tick(now); len(out) != 0 {
			t.Fatalf("tick(%v) = %v, want nothing before deadline-K-m", now, out)
		}
	}
	if out := g.tick(7500 * ms); !slices.Equal(out, []syscall.Signal{syscall.SIGTERM}) {
		t.Fatalf("at deadline-K-m got %v, want SIGTERM", out)
	}
	if g.reason != ReasonFenced {
		t.Fatalf("reason %q, want fenced", g.reason)
	}
	if out := g.tick(9499 * ms); len(out) != 0 {
		t.Fatalf("tick before deadline-m = %v, want nothing", out)
	}
	if out := g.tick(9500 * ms); !slices.Equal(out, []syscall.Signal{syscall.SIGKILL}) {
		t.Fatalf("at deadline-m got %v, want SIGKILL", out)
	}
	if out := g.tick(20_000 * ms); len(out) != 0 {
		t.Fatalf("after SIGKILL got %v, want nothing more", out)
	}
}

// A supervisor frozen past the whole fence: the keeper's next tick must send
// both signals at once rather than grant a grace period it no longer has.
func TestFenceAfterSuspendSignalsAndKillsAtOnce(t *testing.T) {
	g := &groupState{fence: fence.Fence{Deadline: 10_000 * ms, KillTimeout: 2000 * ms, Margin: 500 * ms}, killSignal: syscall.SIGINT}
	out := g.tick(60_000 * ms)
	if !slices.Equal(out, []syscall.Signal{syscall.SIGINT, syscall.SIGKILL}) {
		t.Fatalf("got %v, want SIGINT then SIGKILL", out)
	}
}

func TestRenewalMovesFenceOnlyLater(t *testing.T) {
	g := &groupState{fence: fence.Fence{Deadline: 10_000 * ms, KillTimeout: 1000 * ms, Margin: 250 * ms}}
	g.setDeadline(12_000 * ms)
	g.setDeadline(11_000 * ms) // a late message must not pull the fence back
	if g.fence.Deadline != 12_000*ms {
		t.Fatalf("deadline %v, want 12s", g.fence.Deadline)
	}
	if out := g.tick(10_000 * ms); len(out) != 0 {
		t.Fatalf("fence fired at %v after renewal: %v", 10_000*ms, out)
	}
}

func TestStopEscalatesAfterKillTimeout(t *testing.T) {
	g := &groupState{fence: fence.Fence{Deadline: 100_000 * ms, KillTimeout: 3000 * ms, Margin: 500 * ms}, killSignal: syscall.SIGTERM}
	if out := g.stop(1000*ms, syscall.SIGINT, ReasonStopped); !slices.Equal(out, []syscall.Signal{syscall.SIGINT}) {
		t.Fatalf("stop sent %v, want the requested SIGINT", out)
	}
	if out := g.stop(1500*ms, syscall.SIGTERM, ReasonStopped); len(out) != 0 {
		t.Fatalf("second stop sent %v, want nothing", out)
	}
	if out := g.tick(3999 * ms); len(out) != 0 {
		t.Fatalf("SIGKILL before K: %v", out)
	}
	if out := g.tick(4000 * ms); !slices.Equal(out, []syscall.Signal{syscall.SIGKILL}) {
		t.Fatalf("after K got %v, want SIGKILL", out)
	}
}

// Orphaned by the supervisor's death: SIGKILL at min(now+K, deadline-m).
func TestOrphanedKillsNoLaterThanFence(t *testing.T) {
	g := &groupState{fence: fence.Fence{Deadline: 10_000 * ms, KillTimeout: 5000 * ms, Margin: 500 * ms}, killSignal: syscall.SIGTERM}
	if out := g.orphaned(8000 * ms); !slices.Equal(out, []syscall.Signal{syscall.SIGTERM}) {
		t.Fatalf("orphaned sent %v", out)
	}
	if g.graceEnd != 9500*ms {
		t.Fatalf("grace ends %v, want deadline-m = 9.5s", g.graceEnd)
	}
	if g.reason != ReasonOrphaned {
		t.Fatalf("reason %q", g.reason)
	}
}

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		ws   syscall.WaitStatus
		want int
	}{
		{syscall.WaitStatus(0), 0},
		{syscall.WaitStatus(3 << 8), 3},
		{syscall.WaitStatus(syscall.SIGTERM), 143},
		{syscall.WaitStatus(syscall.SIGKILL), 137},
	} {
		if got := exitcode.Of(c.ws); got != c.want {
			t.Errorf("exitcode.Of(%#x) = %d, want %d", uint32(c.ws), got, c.want)
		}
	}
}

// The keeper sleeps until next: the fence's signal, then its SIGKILL, or the
// end of a grace period, whichever comes first; nothing once killed.
func TestNextWakeUp(t *testing.T) {
	g := &groupState{fence: fence.Fence{Deadline: 10_000 * ms, KillTimeout: 2000 * ms, Margin: 500 * ms}, killSignal: syscall.SIGTERM}
	if got := g.next(); got != 7500*ms {
		t.Fatalf("next = %v, want deadline-K-m", got)
	}
	g.stop(1000*ms, syscall.SIGTERM, ReasonStopped)
	if got := g.next(); got != 3000*ms {
		t.Fatalf("next while stopping = %v, want the grace end", got)
	}
	g.kill(ReasonStopped)
	if got := g.next(); got != 0 {
		t.Fatalf("next after SIGKILL = %v, want none", got)
	}
	if got := (&groupState{}).next(); got != 0 {
		t.Fatalf("next without a deadline = %v, want none", got)
	}
}
