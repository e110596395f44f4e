package proctree

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroup is one term's cgroup, a directory of the cgroup v2 hierarchy
// that the keeper starts the child into (docs/design.md, "Containment").
// The kernel keeps everything the child forks in it, whatever the process
// does to its parent, group or session, so that killing every member and
// knowing that none is left need no walk of the process tree, and no fork
// can outrun either. Only the core files are used (cgroup.procs,
// cgroup.events, cgroup.freeze, cgroup.kill): they work with no
// controller enabled, as on a hybrid host's unified mount.
type Cgroup string

func (d Cgroup) file(name string) string { return filepath.Join(string(d), name) }

// Sub is the cgroup name below d.
func (d Cgroup) Sub(name string) Cgroup { return Cgroup(d.file(name)) }

// Populated reads cgroup.events: whether a live process is in d or below
// it. A zombie is not: the kernel moves a process out when it exits, not
// when it is reaped. A directory that is gone held nothing when it was
// removed (rmdir refuses a populated cgroup).
func (d Cgroup) Populated() (bool, error) {
	b, err := os.ReadFile(d.file("cgroup.events"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	return eventsField(b, "populated") == "1", nil
}

// Empty reports whether no live process is in d or below it, as far as
// cgroup.events can be read: one that cannot be read is not empty.
func (d Cgroup) Empty() bool {
	p, err := d.Populated()
	return !p && err == nil
}

func (d Cgroup) frozen() bool {
	b, err := os.ReadFile(d.file("cgroup.events"))
	return err == nil && eventsField(b, "frozen") == "1"
}

// eventsField is one "name value" line of cgroup.events.
func eventsField(b []byte, name string) string {
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Kill SIGKILLs every process in d and below, including those forked while
// it runs: cgroup.kill does it in the kernel in one step (Linux 5.14).
// Before that, the members are frozen, so that none can fork, killed one
// by one and thawed; the caller repeats it until d is empty, as a process
// may have been on its way into d (a fork) as the freeze began.
func (d Cgroup) Kill() error {
	err := writeFile(d.file("cgroup.kill"), "1")
	switch {
	case err == nil, !d.exists(): // a removed cgroup was empty
		return nil
	case errors.Is(err, os.ErrNotExist): // before Linux 5.14
		return d.SignalFrozen(syscall.SIGKILL)
	}
	return err
}

// writeFile writes one of a cgroup's control files, which exist or not:
// never created.
func writeFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (d Cgroup) exists() bool {
	_, err := os.Stat(string(d))
	return err == nil
}

// freezeWait bounds the wait for a freeze to take hold. A process in an
// uninterruptible sleep (a hung mount) delays it; a stop signal then goes
// to the members of the moment, and SIGKILL follows at the end of the grace
// in any case.
const freezeWait = 100 * time.Millisecond

// SignalFrozen sends sig to every process in d and below once: the members
// are frozen first, so the set is stable while it is read and signalled
// (a process forked meanwhile would otherwise miss the stop signal, and a
// second one means "quit now" to many programs), then thawed, and the
// signals are delivered as they run again.
func (d Cgroup) SignalFrozen(sig syscall.Signal) error {
	if err := writeFile(d.file("cgroup.freeze"), "1"); err != nil {
		if !d.exists() {
			return nil
		}
		return err
	}
	defer func() { _ = writeFile(d.file("cgroup.freeze"), "0") }()
	_ = d.Await(freezeWait, d.frozen)
	pids, err := d.Procs()
	if err != nil {
		return err
	}
	// Each pid is held by a pidfd, then the members are read again: a pid
	// still listed is the process that was opened, so a pid that died and
	// was reused outside the cgroup between the read and the signal is
	// never hit.
	fds := make(map[int]int, len(pids))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, pid := range pids {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			fds[pid] = fd
		}
	}
	again, err := d.Procs()
	if err != nil {
		return err
	}
	var first error
	for _, pid := range again {
		fd, ok := fds[pid]
		if !ok {
			continue
		}
		if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) && first == nil {
			first = err
		}
	}
	return first
}

// Procs lists the processes in d and every cgroup below it (a nested
// etcdlead makes cgroups of its own inside its term's).
func (d Cgroup) Procs() ([]int, error) {
	dirs, err := d.tree()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return pids, err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// Remove removes d and the cgroups below it, deepest first. It fails while
// a live process is in any of them.
func (d Cgroup) Remove() error {
	dirs, err := d.tree()
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := unix.Rmdir(dirs[i]); err != nil && !errors.Is(err, unix.ENOENT) {
			return &os.PathError{Op: "rmdir", Path: dirs[i], Err: err}
		}
	}
	return nil
}

// tree lists d and the cgroups below it, each before those below it; what
// is removed meanwhile is left out.
func (d Cgroup) tree() ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(string(d), func(path string, e os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs, err
}

// Await returns once cond holds, checked at once and after every change of
// d's cgroup.events, or after bound; it reports whether cond held.
func (d Cgroup) Await(bound time.Duration, cond func() bool) bool {
	w, err := WatchEvents(d)
	if err != nil {
		// No descriptor left: look once more at the end.
		if cond() {
			return true
		}
		time.Sleep(bound)
		return cond()
	}
	defer w.Close()
	timeout := time.NewTimer(bound)
	defer timeout.Stop()
	for !cond() {
		select {
		case <-w.Changed:
		case <-timeout.C:
			return cond()
		}
	}
	return true
}

// Events tells of every change to a cgroup's cgroup.events, which the
// kernel marks modified when populated or frozen changes. It polls the file
// itself (POLLPRI) rather than watching it with inotify: closing an inotify
// descriptor waits for the kernel's fsnotify grace period, which held every
// keeper's exit, and with it the end of its supervisor's run, for that long.
type Events struct {
	Changed chan struct{}
	fd      int // cgroup.events
	wake    [2]int
	done    chan struct{}
	once    sync.Once
}

// WatchEvents starts telling of d's changes on Changed, until Close.
func WatchEvents(d Cgroup) (*Events, error) {
	fd, err := unix.Open(d.file("cgroup.events"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	w := &Events{Changed: make(chan struct{}, 1), fd: fd, done: make(chan struct{})}
	if err := unix.Pipe2(w.wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(fd)
		return nil, err
	}
	go w.run()
	return w, nil
}

// run reads the file, which arms the next report of a change, and waits
// in poll for that change or for Close; a change between the read and the
// poll is reported at once. The kernel tells of no removal: a cgroup goes
// only once empty, which it told. A file that can no longer be read counts
// as one last change.
func (w *Events) run() {
	defer close(w.done)
	buf := make([]byte, 256)
	for {
		if _, err := unix.Pread(w.fd, buf, 0); err != nil && err != unix.EINTR {
			w.tell()
			return
		}
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLPRI}, {Fd: int32(w.wake[0]), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			w.tell()
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents != 0 {
			w.tell()
		}
	}
}

func (w *Events) tell() {
	select {
	case w.Changed <- struct{}{}:
	default:
	}
}

// Close stops the watch and waits for its goroutine. It is safe to call
// more than once.
func (w *Events) Close() {
	w.once.Do(func() {
		_, _ = unix.Write(w.wake[1], []byte{0})
		<-w.done
		unix.Close(w.fd)
		unix.Close(w.wake[0])
		unix.Close(w.wake[1])
	})
}
