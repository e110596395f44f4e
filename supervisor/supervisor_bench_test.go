package supervisor

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// These benchmarks cover the supervisor's share of a handoff and of an idle
// term: reading the boot clock and checking the fence (every keeper tick,
// forever), starting a child through a keeper (every term), and starting one
// through a standby keeper that was launched ahead of need. The keeper here
// is this test binary (see TestMain), whose start-up is lighter than the
// etcdlead binary's; scripts/bench measures the real one.

func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		_ = Now()
	}
}

// BenchmarkFenceTick is the keeper's per-tick work: a clock read and the
// fence arithmetic.
func BenchmarkFenceTick(b *testing.B) {
	f := Fence{Deadline: Now() + time.Hour, KillTimeout: 5 * time.Second, Margin: 750 * time.Millisecond}
	for b.Loop() {
		if s, k := f.Due(Now()); s || k {
			b.Fatal("fence due")
		}
	}
}

func benchSpec(b *testing.B) Spec {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { devnull.Close() })
	return Spec{
		Path: "/bin/true", Argv: []string{"true"}, Env: os.Environ(),
		KillSignal: syscall.SIGTERM, KillTimeout: time.Second, FenceMargin: 250 * time.Millisecond,
		LogLevel: "error", Stdin: devnull, Stdout: devnull, Stderr: devnull,
	}
}

// BenchmarkStartChild is a term's child from nothing to gone: exec of a
// keeper, fork and exec of the child, its exit, the keeper's report.
func BenchmarkStartChild(b *testing.B) {
	spec := benchSpec(b)
	for b.Loop() {
		spec.Deadline = Now() + time.Minute
		c, err := Start(spec, hclog.NewNullLogger())
		if err != nil {
			b.Fatal(err)
		}
		<-c.Done()
	}
}

// BenchmarkStandbyStartChild is the same with the keeper launched ahead of
// need (not timed): what a handoff costs when a standby keeper is ready.
func BenchmarkStandbyStartChild(b *testing.B) {
	spec := benchSpec(b)
	for b.Loop() {
		b.StopTimer()
		p, err := Prepare(spec, hclog.NewNullLogger())
		if err != nil {
			b.Fatal(err)
		}
		// Let the keeper finish its start-up, as a standby keeper has
		// long before its candidate wins.
		time.Sleep(20 * time.Millisecond)
		b.StartTimer()
		c, err := p.Start(Now()+time.Minute, nil, hclog.NewNullLogger())
		if err != nil {
			b.Fatal(err)
		}
		<-c.Done()
	}
}

// BenchmarkStopChild is the keeper's share of a graceful handoff, from the
// stop to the report (not timed: the start): the signal to the group, the
// walk of the process tree, the child's exit, the wait for no child left.
func BenchmarkStopChild(b *testing.B) {
	spec := benchSpec(b)
	spec.Path, spec.Argv = "/bin/sleep", []string{"sleep", "60"}
	for b.Loop() {
		b.StopTimer()
		spec.Deadline = Now() + time.Minute
		c, err := Start(spec, hclog.NewNullLogger())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c.Stop(syscall.SIGTERM)
		<-c.Done()
	}
}
