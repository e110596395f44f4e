package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// The --notify command, in order around the child: leader once the child
// has started (the probe's "start" line is in the journal before the
// command's), follower and stopped only once the child and its grandchild,
// which ignores SIGTERM and so lives until the kill timeout, are gone (the
// command finds neither). Each gets the role as $1 and its term's token.
func TestNotifyOrderedAroundTheChild(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	pids := filepath.Join(t.TempDir(), "pids")
	hook := fmt.Sprintf(`echo "hook $1 rev=$ETCDLEAD_REV reason=$ETCDLEAD_REASON" >> %[1]s
[ "$1" = leader ] && exit 0
for p in $(cat %[2]s); do kill -0 "$p" 2>/dev/null && echo "alive $p"; done
echo checked`, e.journal, pids)
	flags := append([]string{"--notify=" + hook}, fast...)
	c1 := e.start("c1", flags, e.probe("-grandchild"))
	gline, _ := c1.out.waitFor(t, "c1", "grandchild ", 0)
	ready, _ := c1.out.waitFor(t, "c1", "ready", 0)
	if err := os.WriteFile(pids, fmt.Appendf(nil, "%d %s\n", readyPid(t, ready), strings.TrimPrefix(gline, "grandchild ")), 0o600); err != nil {
		t.Fatal(err)
	}
	c1.log.waitFor(t, "c1", "--notify told the role: role=leader", 0)
	c2 := e.start("c2", fast, e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)

	if _, errs, code := e.etcdleadCmd("resign", "--election=probe", "--id=c1"); code != 0 {
		t.Fatalf("resign: exit %d: %s", code, errs)
	}
	line, _ := c1.log.waitFor(t, "c1", "--notify told the role: role=follower", 0)
	if strings.Contains(line, "alive") || !strings.Contains(line, "checked") {
		t.Errorf("follower told while the old child or its grandchild lived: %s", line)
	}
	c2.out.waitFor(t, "c2", "ready", 0)
	c1.stop(t)
	if code := c1.exit(t); code != 143 && code != 0 {
		t.Errorf("c1 exit %d", code)
	}
	stopAll(t, e, c2)

	var order []string
	for _, l := range e.journalLines(t) {
		f := strings.Fields(l)
		if f[0] == "hook" || (f[0] == "start" && strings.Contains(l, "id=c1 ")) {
			order = append(order, strings.Join(f[:min(len(f), 2)], " "))
		}
	}
	want := []string{"start id=c1", "hook leader", "hook follower", "hook stopped"}
	if !slices.Equal(order, want) {
		t.Errorf("journal order %q, want %q", order, want)
	}
	if n := c1.log.count("reason=resigned"); n == 0 {
		t.Errorf("follower not told why: %s", c1.log)
	}
}

// A command that hangs holds up no handoff: the leader resigns while its
// --notify command for leader still runs, stops its child itself (not its
// fence, as a leader stuck waiting would), and the next candidate's child
// starts before that command's timeout has come (its warning is not yet
// in the log).
func TestNotifyHangingCommandDelaysNoHandoff(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	flags := append([]string{"--notify=sleep 1000", "--notify-timeout=40s"}, fast...)
	c1, c2 := e.leaderAndWaiter(flags)
	if _, errs, code := e.etcdleadCmd("resign", "--election=probe", "--id=c1"); code != 0 {
		t.Fatalf("resign: exit %d: %s", code, errs)
	}
	c2.out.waitFor(t, "c2", "ready", 0)
	if l, ok := c1.log.find("--notify failed"); ok {
		t.Fatalf("the handoff came only after the command's timeout: %s", l)
	}
	// Handed off by the resign, not by the fence of a leader that was
	// stuck and stopped renewing.
	c1.stoppedBySupervisor(t)
	// The hanging commands are killed with their etcdlead, not waited for.
	for _, c := range []*candidate{c1, c2} {
		c.signal(t, syscall.SIGKILL)
		c.exit(t)
	}
	e.journalLines(t)
}
