package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/bootclock"
)

// These benchmarks cover the supervisor's share of a handoff and of an idle
// term: reading the boot clock and checking the fence (every keeper tick,
// forever), starting a child through a keeper (every term), and starting one
// through a standby keeper that was launched ahead of need.
// BenchmarkStartChild runs the two real keepers, built from this checkout:
// the keeper binary, and its fallback, the etcdlead binary re-executed. The
// others run this test binary as the keeper (see TestMain).

func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		_ = bootclock.Now()
	}
}

// BenchmarkFenceTick is the keeper's per-tick work: a clock read and the
// fence arithmetic.
func BenchmarkFenceTick(b *testing.B) {
	f := Fence{Deadline: bootclock.Now() + time.Hour, KillTimeout: 5 * time.Second, Margin: 750 * time.Millisecond}
	for b.Loop() {
		if s, k := f.Due(bootclock.Now()); s || k {
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
// keeper, fork and exec of the child, its exit, the keeper's report. Its
// started-ns/op is the part until Start returns, which the keeper reports
// once the child's exec succeeded: the time to the child's first
// instruction, near enough.
func BenchmarkStartChild(b *testing.B) {
	dir := b.TempDir()
	cmd := exec.Command("go", "build", "-race=false", "-o", dir+string(filepath.Separator),
		"github.com/etcdlead/etcdlead", "github.com/etcdlead/etcdlead/cmd/etcdlead-keeper")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for _, k := range []struct {
		name      string
		keeperDir string // where the keeper binary is looked for
		self      string // the fallback
		want      string // the keeper that must have run
	}{
		{KeeperName, dir, selfExe, filepath.Join(dir, KeeperName)},
		{"etcdlead", b.TempDir(), filepath.Join(dir, "etcdlead"), ""},
	} {
		b.Run("keeper="+k.name, func(b *testing.B) {
			useKeeperDir(b, k.keeperDir)
			old := selfExe
			selfExe = k.self
			b.Cleanup(func() { selfExe = old })
			spec := benchSpec(b)
			var started time.Duration
			for b.Loop() {
				spec.Deadline = bootclock.Now() + time.Minute
				t0 := bootclock.Now()
				c, err := Start(spec, hclog.NewNullLogger())
				if err != nil {
					b.Fatal(err)
				}
				started += bootclock.Now() - t0
				<-c.Done()
			}
			b.ReportMetric(float64(started)/float64(b.N), "started-ns/op")
			if got := keeperPath(hclog.NewNullLogger()); got != k.want {
				b.Fatalf("the keeper was %q, want %q", got, k.want)
			}
		})
	}
}

// BenchmarkStandbyStartChild is the same with the keeper launched ahead of
// need (not timed): what a handoff costs when a standby keeper is ready, in
// each containment: with cgroups, the child is started into its term's
// fresh cgroup (made ahead of need too).
func BenchmarkStandbyStartChild(b *testing.B) {
	for _, mode := range []string{ContainProcessGroup, ContainCgroup} {
		b.Run("containment="+mode, func(b *testing.B) {
			if mode == ContainCgroup {
				useCgroups(b)
			}
			spec := benchSpec(b)
			for b.Loop() {
				b.StopTimer()
				p, err := Prepare(spec, hclog.NewNullLogger())
				if err != nil {
					b.Fatal(err)
				}
				// Let the keeper finish its start-up, as a standby keeper
				// has long before its candidate wins.
				time.Sleep(20 * time.Millisecond)
				b.StartTimer()
				c, err := p.Start(bootclock.Now()+time.Minute, nil, hclog.NewNullLogger())
				if err != nil {
					b.Fatal(err)
				}
				<-c.Done()
			}
		})
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
		spec.Deadline = bootclock.Now() + time.Minute
		c, err := Start(spec, hclog.NewNullLogger())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c.Stop(syscall.SIGTERM)
		<-c.Done()
	}
}
