package e2e

import (
	"strings"
	"testing"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// README.md's cron line with --run-id, fired on several machines: the
// first runs the job, every later one of the same firing exits without
// running it (0 and no output with --conflict-exit-code=0, else 75),
// however late it comes; a failed run stays done, unless --run-id-retry
// lets the next firing's candidate run it again; the next firing runs.
// A run id with odd bytes is one line and 125.
func TestRunIDRunsOncePerFiring(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	cron := func(name, id string, code string, extra ...string) *candidate {
		flags := append([]string{"--election=probe", "--once", "--no-wait", "--run-id=" + id}, extra...)
		return e.start(name, flags, e.probe("-exit", code))
	}
	quiet := "--conflict-exit-code=0"
	want := func(c *candidate, code, runs int) {
		t.Helper()
		if got := c.exit(t); got != code {
			t.Errorf("%s: exit %d, want %d", c.name, got, code)
		}
		if got := e.jobRuns(t); got != runs {
			t.Errorf("after %s: %d runs, want %d", c.name, got, runs)
		}
	}

	want(cron("first", "20261205T1000", "0", quiet), 0, 1)
	late := cron("late", "20261205T1000", "0", quiet)
	want(late, 0, 1)
	if said := late.out.String() + late.log.String(); said != "" {
		t.Errorf("a cron line whose firing ran wrote %q, want nothing", said)
	}
	loud := cron("loud", "20261205T1000", "0")
	want(loud, 75, 1)
	if _, ok := loud.log.find("this firing ran already"); !ok {
		t.Errorf("without --conflict-exit-code=0 the log does not say why nothing ran")
	}

	want(cron("fails", "20261205T1010", "3"), 3, 2)
	want(cron("after-failure", "20261205T1010", "0"), 75, 2)

	want(cron("fails-retry", "20261205T1020", "3", "--run-id-retry"), 3, 3)
	want(cron("retried", "20261205T1020", "0", "--run-id-retry"), 0, 4)
	want(cron("after-retry", "20261205T1020", "0", "--run-id-retry"), 75, 4)

	want(cron("next-firing", "20261205T1030", "0"), 0, 5)

	out, errs, code := e.etcdleadCmd("run", "--election=probe", "--run-id=a\x1b[2Jb", "--", "true")
	if code != 125 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--run-id") {
		t.Errorf("a run id with odd bytes: exit %d, stdout %q, stderr %q; want 125 and one line naming --run-id", code, out, errs)
	}
}
