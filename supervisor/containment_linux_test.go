package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/supervisor/internal/proctree"
)

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/sys/fs/cgroup`:          "/sys/fs/cgroup",
		`/mnt/with\040space`:      "/mnt/with space",
		`/a\011tab\012nl\134back`: "/a\ttab\nnl\\back",
		`/trailing\04`:            `/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// systemd marks the cgroups it delegates with an extended attribute; a
// cgroup below one is delegated too, one beside it is not.
func TestDelegatedByAttribute(t *testing.T) {
	base := needCgroups(t)
	mnt, err := cgroup2Mount("/")
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(base, "delegation-test-"+strconv.Itoa(os.Getpid()))
	other := unit + "-other"
	for _, d := range []string{unit, filepath.Join(unit, "below"), other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = proctree.Cgroup(unit).Remove()
		_ = proctree.Cgroup(other).Remove()
	})
	if delegated(unit, mnt.point) {
		t.Fatal("a cgroup with no mark is taken for delegated")
	}
	if err := unix.Setxattr(unit, "trusted.delegate", []byte("1"), 0); err != nil {
		t.Fatalf("cannot mark %s: %v", unit, err)
	}
	if !delegated(unit, mnt.point) || !delegated(filepath.Join(unit, "below"), mnt.point) {
		t.Error("a delegated cgroup, or one below it, is not taken for delegated")
	}
	if delegated(other, mnt.point) {
		t.Error("a cgroup beside a delegated one is taken for delegated")
	}
}

// A dead etcdlead's term whose keeper still runs is left to the keeper,
// and what the keeper leaves behind is killed once it is gone: here the
// keeper ends (SIGKILL) after the next etcdlead has looked, as one killed
// a moment before that start may still be on its way out.
func TestStaleTermKilledOnceItsKeeperEnds(t *testing.T) {
	base := needCgroups(t)
	// This process's pid with a start time it never had: a dead etcdlead.
	inst := filepath.Join(base, instancePrefix+strconv.Itoa(os.Getpid())+"-1")
	term := proctree.Cgroup(inst).Sub("1")
	for _, d := range []proctree.Cgroup{proctree.Cgroup(inst), term, term.Sub("keeper"), term.Sub("child")} {
		if err := os.Mkdir(string(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = proctree.Cgroup(inst).Remove() })
	startIn := func(d proctree.Cgroup) *exec.Cmd {
		fd, err := unix.Open(string(d), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		cmd := exec.Command("sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	keeper, child := startIn(term.Sub("keeper")), startIn(term.Sub("child"))
	childEnded := make(chan error, 1)
	go func() { childEnded <- child.Wait() }()

	removeStale(base, hclog.NewNullLogger())
	select {
	case <-childEnded:
		t.Fatal("the child of a term whose keeper runs was killed")
	default:
	}
	if err := keeper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-childEnded:
	case <-time.After(staleKillWait + 10*time.Second):
		t.Fatal("the child still runs after its keeper ended")
	}
	// The kernel tells of no cgroup's removal: looked for.
	for end := time.Now().Add(staleKillWait); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(inst); os.IsNotExist(err) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the dead etcdlead's cgroup %s is still there", inst)
		}
	}
}

// proctree.Events tells of a cgroup that empties, and Close ends the
// watch, also of a cgroup removed meanwhile (the keeper's loop waits on
// these, and closes its watch on its way out).
func TestCgroupEventsTellChanges(t *testing.T) {
	base := needCgroups(t)
	d := proctree.Cgroup(filepath.Join(base, instancePrefix+"events-"+strconv.Itoa(os.Getpid())))
	if err := os.Mkdir(string(d), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Remove() })
	fd, err := unix.Open(string(d), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	err = cmd.Start()
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	w, err := proctree.WatchEvents(d)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if busy, err := d.Populated(); !busy || err != nil {
		t.Fatalf("populated = %v, %v with sleep in it", busy, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	select {
	case <-w.Changed:
	case <-time.After(20 * time.Second):
		t.Fatal("no change told as the cgroup emptied")
	}
	if busy, err := d.Populated(); busy || err != nil {
		t.Fatalf("populated = %v, %v once its one process was reaped", busy, err)
	}

	// Removed under the watch: Close still ends it.
	if err := unix.Rmdir(string(d)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w.Close() // a second Close is harmless
}
