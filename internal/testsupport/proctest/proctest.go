package proctest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stat reads a process's state letter and parent from /proc/PID/stat.
func stat(pid int) (state byte, ppid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name, in parentheses, may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 2 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0][0], ppid, err
}

// ParentOf is a process's parent pid.
func ParentOf(tb testing.TB, pid int) int {
	tb.Helper()
	_, ppid, err := stat(pid)
	if err != nil {
		tb.Fatal(err)
	}
	return ppid
}

// Running is a process that runs: it exists and is no zombie waiting to be
// reaped.
func Running(pid int) bool {
	state, _, err := stat(pid)
	return err == nil && state != 'Z'
}

// Stopped is a process all of whose threads are stopped by a signal
// (state T). kill(2) returns before a group stop has reached every thread,
// so a test that freezes a process waits for this before it acts on the
// freeze.
func Stopped(pid int) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/stat")
		if err != nil {
			return false
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

// Gone is a process that has been reaped: no process, no zombie.
func Gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// GoneBy waits, through a pidfd, until pid has exited (a zombie counts as
// exited), and reports whether it did by the given time.
func GoneBy(pid int, by time.Time) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("pidfd_open(%d): %w", pid, err)
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, max(int(time.Until(by)/time.Millisecond), 0))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n == 1, err
	}
}

// GoneSince is GoneBy for a process seen at seen, or a little after it
// started: a process with its pid that started later is another one (pids
// are reused, and soon on a machine that forks fast), and counts as gone.
func GoneSince(pid int, seen, by time.Time) (bool, error) {
	if started, err := startedAt(pid); err == nil && started.After(seen.Add(time.Second)) {
		return true, nil
	}
	return GoneBy(pid, by)
}

// startedAt is when process pid started, to within a clock tick: field 22
// of /proc/PID/stat, in ticks after boot (USER_HZ, 100 on Linux), after
// btime in /proc/stat.
func startedAt(pid int) (time.Time, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return time.Time{}, err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 20 {
		return time.Time{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	st, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(boot, 0).Add(time.Duration(ticks) * 10 * time.Millisecond), nil
		}
	}
	return time.Time{}, errors.New("/proc/stat: no btime")
}

// KillAtCleanup SIGKILLs the processes when the test ends, should they still
// run: what a failing keeper left behind. Pidfds make sure a reused pid is
// never hit.
func KillAtCleanup(tb testing.TB, pids ...int) {
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		tb.Cleanup(func() {
			_ = unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
			unix.Close(fd)
		})
	}
}

// Full returns a new pipe filled until a write would block, its write end
// blocking, as stderr is when its reader has stopped.
func Full(tb testing.TB) (r, w *os.File) {
	tb.Helper()
	// Not os.Pipe, whose descriptors Go makes non-blocking for its poller.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		tb.Fatal(err)
	}
	if err := Fill(fmt.Sprintf("/proc/self/fd/%d", p[1])); err != nil {
		tb.Fatal(err)
	}
	return os.NewFile(uintptr(p[0]), "full-r"), os.NewFile(uintptr(p[1]), "full-w")
}

// Fill fills the pipe at path (a /proc/PID/fd/N, say) until a write would
// block, down to the last byte. It writes through a file description of
// its own, opened non-blocking: O_NONBLOCK on one shared with a process
// under test would change what that process sees. The filler is lines, so
// a reader that scans lines copes with it.
func Fill(path string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	chunk := []byte(strings.Repeat("filler to stall the pipe\n", 160))
	for _, size := range []int{len(chunk), 1} {
		for {
			if _, err := unix.Write(fd, chunk[len(chunk)-size:]); err != nil {
				if err == unix.EAGAIN {
					break
				}
				return err
			}
		}
	}
	return nil
}

// Cgroup2Root is where the whole cgroup2 hierarchy is mounted:
// /sys/fs/cgroup, or its unified mount in systemd's hybrid layout.
func Cgroup2Root() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		if f := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(f) > 4 && f[3] == "/" {
			return f[4], nil
		}
	}
	return "", errors.New("no cgroup2 mount")
}

// RemoveCgroup kills whatever runs in the cgroup at dir and below, and
// removes it (RemoveCgroupTree): what an etcdlead killed with -9 leaves for
// the next etcdlead started beside it, which a test that ends has none of.
// Only a directory named as etcdlead names its cgroups is touched.
func RemoveCgroup(tb testing.TB, dir string) {
	tb.Helper()
	if !strings.HasPrefix(filepath.Base(dir), "etcdlead-") {
		tb.Errorf("not an etcdlead cgroup: %s", dir)
		return
	}
	if err := RemoveCgroupTree(dir); err != nil {
		tb.Error(err)
	}
}

// RemoveCgroupTree kills whatever runs in the cgroup at dir and below, and
// removes those cgroups, deepest first.
func RemoveCgroupTree(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := emptyAndRemove(dirs[i]); err != nil {
			errs = append(errs, fmt.Errorf("cgroup %s left behind: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// emptyAndRemove kills the processes in one cgroup, waits until the
// kernel says no task is left in it, and removes it; again for any that
// were forked meanwhile. It waits on cgroup.events, not on the pids in
// cgroup.procs: a process whose leader thread has exited is in no
// cgroup.procs while its last threads still exit, and holds the cgroup
// until they have.
func emptyAndRemove(dir string) error {
	var err error
	for range 10 {
		if err = os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		awaitUnpopulated(dir, 10*time.Second)
	}
	return err
}

// awaitUnpopulated returns once dir's cgroup.events says "populated 0",
// or after bound. The kernel tells of a change to the file by POLLPRI,
// re-armed by each read.
func awaitUnpopulated(dir string, bound time.Duration) {
	fd, err := unix.Open(filepath.Join(dir, "cgroup.events"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(bound)
	buf := make([]byte, 512)
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err != nil || bytes.Contains(buf[:max(n, 0)], []byte("populated 0")) {
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}, int(left.Milliseconds())+1)
	}
}
