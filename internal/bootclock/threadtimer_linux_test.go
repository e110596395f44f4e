package bootclock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The fence's SIGKILL goes out from a thread in the lowest real-time
// class where the process may put one there (root, as under CI), reset on
// fork; where it may not, the timer still fires, from an ordinary thread.
func TestThreadTimerClass(t *testing.T) {
	attr := make(chan *unix.SchedAttr, 1)
	kt, err := NewThreadTimer(func() {
		a, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			t.Errorf("sched_getattr on the timer's thread: %v", err)
		}
		attr <- a
	})
	if err != nil {
		t.Fatal(err)
	}
	defer kt.Close()
	kt.At(Now() + 10*time.Millisecond)
	var a *unix.SchedAttr
	select {
	case a = <-attr:
	case <-time.After(20 * time.Second):
		t.Fatal("the timer did not fire within the safety timeout")
	}
	if a == nil {
		return
	}
	permitted := (os.Geteuid() == 0 || rtprioLimit(t) > 0) && !rtThrottledToZero()
	switch {
	case permitted && kt.Realtime != nil:
		t.Fatalf("the timer's thread is not real-time although the process may make it so: %v", kt.Realtime)
	case permitted && (a.Policy != unix.SCHED_FIFO || a.Priority != 1 || a.Flags&unix.SCHED_FLAG_RESET_ON_FORK == 0):
		t.Fatalf("the timer fired from policy %d priority %d flags %#x, want SCHED_FIFO 1, reset on fork", a.Policy, a.Priority, a.Flags)
	case !permitted && (kt.Realtime == nil || !errors.Is(kt.Realtime, unix.EPERM)):
		t.Fatalf("unprivileged, the class change said %v, want EPERM", kt.Realtime)
	case !permitted && a.Policy != unix.SCHED_NORMAL:
		t.Fatalf("unprivileged, the timer fired from policy %d, want SCHED_OTHER", a.Policy)
	}
}

func rtprioLimit(t *testing.T) uint64 {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_RTPRIO, &l); err != nil {
		t.Fatal(err)
	}
	return l.Cur
}

// rtThrottledToZero is whether this process is in a cgroup v1 cpu group
// that gives real-time threads no run time (a kernel built with
// RT_GROUP_SCHED): there even root's request is refused.
func rtThrottledToZero() bool {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 || !strings.Contains(","+f[1]+",", ",cpu,") {
			continue
		}
		rt, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", f[1], f[2], "cpu.rt_runtime_us"))
		return err == nil && strings.TrimSpace(string(rt)) == "0"
	}
	return false
}
