package e2e

import (
	"os"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// An operator's pause: the leader's supervisor stops its child, the
// waiter gives up its place, and pause returns only once no child or
// descendant of the election runs; while paused no candidate holds a
// lease, a cron line of the election exits at once and writes nothing,
// and status shows who paused and why, quoted; resume lets one lead.
func TestPauseStopsTheLeaderAndBlocksEveryone(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c1, c2 := e.leaderAndWaiter(slow, "-grandchild")
	out, errs, code := e.etcdleadCmd("pause", "--election=probe", "--reason=db migration \x1b[2J OPS-123", "--by=ops")
	if code != 0 || !strings.Contains(out, "no command of it runs") {
		t.Fatalf("pause: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// The child and its grandchild hold the probe's lock for as long as
	// either runs.
	if held := lockHeld(t, e.lock); held {
		t.Fatal("pause returned while a process of the election's child still held its lock")
	}
	c1.stoppedBySupervisor(t)
	c1.log.waitFor(t, "c1", "waiting for etcdlead resume", 0)
	c2.log.waitFor(t, "c2", "waiting for etcdlead resume", 0)
	cli := cluster.Client(t)
	resp, err := cli.Get(ctxT(t), e.prefix+"probe", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Key) != e.prefix+"probe.pause" {
			t.Errorf("while paused, %s is in etcd: a paused candidate holds no lease", kv.Key)
		}
	}
	// README.md's cron line.
	cron := e.start("cron", []string{"--election=probe", "--once", "--no-wait", "--conflict-exit-code=0"}, e.probe("-exit", "0"))
	if got := cron.exit(t); got != 0 {
		t.Errorf("a paused cron line exited %d, want --conflict-exit-code's 0", got)
	}
	if said := cron.out.String() + cron.log.String(); said != "" {
		t.Errorf("a paused cron line wrote %q, want nothing", said)
	}
	if _, _, code := e.etcdleadCmd("run", "--election=probe", "--no-wait", "--", "true"); code != 75 {
		t.Errorf("run --no-wait while paused: exit %d, want the conflict code 75", code)
	}
	status, _, _ := e.etcdleadCmd("status", "--election=probe")
	if !strings.Contains(status, `paused by ops at `) || !strings.Contains(status, `db migration \x1b[2J OPS-123`) {
		t.Errorf("status does not show the pause, its reason quoted:\n%s", status)
	}
	c1.stop(t)
	c1.exit(t)
	if out, errs, code := e.etcdleadCmd("resume", "--election=probe"); code != 0 {
		t.Fatalf("resume: exit %d, %q %q", code, out, errs)
	}
	c2.out.waitFor(t, "c2", "ready", 0)
	if _, _, code := e.etcdleadCmd("resume", "--election=probe"); code != 3 {
		t.Errorf("resume of an election not paused: exit %d, want 3", code)
	}
	stopAll(t, e, c2)
	if runs := e.jobRuns(t); runs != 2 {
		t.Errorf("%d children ran, want c1's before the pause and c2's after it", runs)
	}
}

// lockHeld says whether a process holds the probe's lock.
func lockHeld(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return true
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}
