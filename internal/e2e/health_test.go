package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
)

// checkFlags are a fast health check that fails while the file $SICK
// exists, and leaves a process that ignores SIGTERM behind at every run,
// its pid in $PIDS: a hostile check, contained like the command.
func checkFlags(extra ...string) []string {
	return append([]string{"--election=probe", "--ttl=4s", "--log-level=debug",
		`--health-cmd=sh -c 'trap "" TERM; while :; do sleep 1; done' & echo $! >> "$PIDS"; test ! -e "$SICK"`,
		"--health-interval=200ms", "--health-timeout=5s", "--health-retries=2"}, extra...)
}

// A leader whose check fails hands leadership to the healthy candidate
// that waits: its command and every process of its checks gone before the
// successor's command starts (the probe's lock), and it sits out before
// it queues again. Its checks' leftovers never outlive their check.
func TestUnhealthyLeaderReplacedByHealthyCandidate(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	dir := t.TempDir()
	env := func(name string) []string {
		return []string{"SICK=" + filepath.Join(dir, name+".sick"), "PIDS=" + filepath.Join(dir, name+".pids")}
	}
	c1 := e.start("c1", checkFlags(), e.probe(), env("c1")...)
	c1.out.waitFor(t, "c1", "ready", 0)
	c1.log.waitFor(t, "c1", "the command is healthy", 0)
	c2 := e.start("c2", checkFlags(), e.probe(), env("c2")...)
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	if err := os.WriteFile(filepath.Join(dir, "c1.sick"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c1.log.waitFor(t, "c1", "stepping down for a waiting candidate", 0)
	c1.stoppedBySupervisor(t)
	c2.out.waitFor(t, "c2", "ready", 0)
	c2.log.waitFor(t, "c2", "the command is healthy", 0)
	c1.log.waitFor(t, "c1", "stepped down: the command was unhealthy", 0)
	if out, _, _ := e.etcdleadCmd("status", "--election=probe"); !strings.Contains(out, "leader (command healthy)") || !strings.Contains(out, "c2") {
		t.Errorf("status does not show the new leader's command healthy:\n%s", out)
	}
	stopAll(t, e, c1, c2)
	if runs := e.jobRuns(t); runs != 2 {
		t.Errorf("%d children ran, want c1's and c2's", runs)
	}
	for _, name := range []string{"c1", "c2"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".pids"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if !proctest.Gone(pid) {
				proctest.KillAtCleanup(t, pid)
				t.Errorf("%s: process %d of a health check outlived its check", name, pid)
			}
		}
	}
}

// With nobody waiting, an unhealthy command is restarted in place, in the
// same term (the same fencing token), after the damping delay. status
// --watch follows the verdicts.
func TestUnhealthyCommandRestartedInPlace(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	dir := t.TempDir()
	sick := filepath.Join(dir, "sick")
	w := e.watchStatus("probe", nil)
	c := e.start("c1", checkFlags(), e.probe(), "SICK="+sick, "PIDS="+filepath.Join(dir, "pids"))
	c.out.waitFor(t, "c1", "ready", 0)
	_, healthy := w.out.waitFor(t, "watch", "health=healthy", 0)
	if err := os.WriteFile(sick, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.log.waitFor(t, "c1", "restarting it in place", 0)
	w.out.waitFor(t, "watch", "health=unhealthy", healthy)
	if err := os.Remove(sick); err != nil {
		t.Fatal(err)
	}
	c.log.waitFor(t, "c1", "restarting the command in place", 0)
	_, at := c.out.waitFor(t, "c1", "ready", 0)
	c.out.waitFor(t, "c1", "ready", at+1)
	w.out.waitFor(t, "watch", "health=healthy", healthy+1)
	stopWatch(t, w)
	stopAll(t, e, c)
	var revs []string
	for _, l := range e.journalLines(t) {
		if strings.HasPrefix(l, "start ") {
			revs = append(revs, strings.Fields(l)[2])
		}
	}
	if len(revs) != 2 || revs[0] != revs[1] {
		t.Errorf("starts %q: want two in one term", revs)
	}
}

// An ineligible candidate never leads; a leader that becomes ineligible
// steps down to the candidate that is eligible again.
func TestIneligibleCandidateNeverLeads(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	dir := t.TempDir()
	maint := func(name string) string { return filepath.Join(dir, name+".maintenance") }
	flags := []string{"--election=probe", "--ttl=4s", `--eligible-cmd=test ! -e "$MAINT"`, "--eligible-interval=200ms"}
	if err := os.WriteFile(maint("c1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c1 := e.start("c1", flags, e.probe(), "MAINT="+maint("c1"))
	c1.log.waitFor(t, "c1", "not eligible", 0)
	c2 := e.start("c2", flags, e.probe(), "MAINT="+maint("c2"))
	c2.out.waitFor(t, "c2", "ready", 0)
	if _, _, code := e.etcdleadCmd("run", "--election=probe", "--no-wait", "--eligible-cmd=exit 1", "--", "true"); code != 75 {
		t.Errorf("an ineligible run --no-wait exited %d, want the conflict code 75", code)
	}
	if err := os.Remove(maint("c1")); err != nil {
		t.Fatal(err)
	}
	c1.log.waitFor(t, "c1", "eligible again", 0)
	c1.log.waitFor(t, "c1", "waiting on predecessor", 0)
	if err := os.WriteFile(maint("c2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c2.log.waitFor(t, "c2", "no longer eligible", 0)
	c2.stoppedBySupervisor(t)
	c1.out.waitFor(t, "c1", "ready", 0)
	stopAll(t, e, c1, c2)
	if runs := e.jobRuns(t); runs != 2 {
		t.Errorf("%d children ran, want c2's and then c1's", runs)
	}
}
