package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// readmeCronFlags returns the options of the README's crontab line, without
// --endpoints (the test's etcd stands in for it).
func readmeCronFlags(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n```cron\n")
	line, _, ok2 := strings.Cut(after, "\n")
	if !ok || !ok2 {
		t.Fatal("README.md has no cron block")
	}
	fields := strings.Fields(line)
	// Five time fields, then `etcdlead run`, the options, `--`, the job.
	if len(fields) < 8 || fields[5] != "etcdlead" || fields[6] != "run" {
		t.Fatalf("README.md's cron line is not `... etcdlead run ...`: %q", line)
	}
	var flags []string
	for _, f := range fields[7:] {
		if f == "--" {
			return flags
		}
		if !strings.HasPrefix(f, "--endpoints=") {
			flags = append(flags, f)
		}
	}
	t.Fatalf("README.md's cron line has no -- before the job: %q", line)
	return nil
}

// The README's cron line, fired on two machines: the job runs once, and the
// machine that loses exits 0 without writing a thing, so cron has nothing
// to mail.
func TestReadmeCronLineLoserIsQuiet(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	flags := readmeCronFlags(t)
	m1 := e.start("m1", flags, e.probe())
	m1.out.waitFor(t, "m1", "ready", 0)
	m2 := e.start("m2", flags, e.probe("-exit", "0"))
	if got := m2.exit(t); got != 0 {
		t.Errorf("the losing machine exited %d, want 0", got)
	}
	if s := allOf(t, m2.log); s != "" {
		t.Errorf("the losing machine wrote to stderr:\n%s", s)
	}
	if s := allOf(t, m2.out); s != "" {
		t.Errorf("the losing machine wrote to stdout:\n%s", s)
	}
	m1.stop(t)
	m1.exit(t)
	if runs := e.jobRuns(t); runs != 1 {
		t.Fatalf("the job ran %d times, want once", runs)
	}
}

// allOf waits for the end of a stream and returns all it said.
func allOf(t *testing.T, l *lines) string {
	t.Helper()
	timeout := time.After(safety)
	for {
		all, closed, changed := l.snapshot()
		if closed {
			return strings.Join(all, "\n")
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("the stream did not end within %s", safety)
		}
	}
}
