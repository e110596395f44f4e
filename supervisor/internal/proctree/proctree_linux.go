package proctree

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/bootclock"
)

// procfs reads the process tree from /proc. Where the kernel has no
// /proc/PID/task/TID/children files (built without CONFIG_PROC_CHILDREN), it
// scans the parent pid of every process instead: slower, same answer.
type procfs struct {
	root string
	scan bool
}

// StatScan makes every walk use the parent-pid scan; tests set it to
// exercise the fallback on kernels that have the children files.
var StatScan atomic.Bool

func hostProcfs() procfs {
	self := os.Getpid()
	_, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d/children", self, self))
	return procfs{root: "/proc", scan: StatScan.Load() || err != nil}
}

type Stat struct{ PPid, Pgrp int }

// parseStat reads the parent pid and process group from /proc/PID/stat. The
// command name in parentheses may hold spaces and ')', so the fields are
// counted from the last ')'.
func parseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return Stat{}, errors.New("stat: too few fields")
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return Stat{}, errors.New("stat: malformed")
	}
	return Stat{PPid: ppid, Pgrp: pgrp}, nil
}

func (p procfs) stat(pid int) (Stat, error) {
	b, err := os.ReadFile(p.root + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return parseStat(b)
}

// lister returns the children of a pid as one walk sees them. A process
// that is gone has none (its children were re-parented, and a later walk
// finds them there).
func (p procfs) lister() func(pid int) []int {
	if !p.scan {
		return p.childrenFiles
	}
	byParent := p.scanParents()
	return func(pid int) []int { return byParent[pid] }
}

// childrenFiles reads the children of every thread: a child belongs to the
// thread that forked it, and an orphan to whichever thread of its
// subreaper the kernel picked.
func (p procfs) childrenFiles(pid int) []int {
	dir := p.root + "/" + strconv.Itoa(pid) + "/task"
	tasks, err := readNames(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, tid := range tasks {
		b, err := os.ReadFile(dir + "/" + tid + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

func (p procfs) scanParents() map[int][]int {
	names, err := readNames(p.root)
	byParent := make(map[int][]int)
	if err != nil {
		return byParent
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if st, err := p.stat(pid); err == nil {
			byParent[st.PPid] = append(byParent[st.PPid], pid)
		}
	}
	return byParent
}

// readNames lists a directory without sorting or stat'ing its entries.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// A sweep sends one signal, once, to every process below root, whatever its
// group or session. Processes are held by pidfd from the moment they are
// found, so a pid that dies and is reused meanwhile is never signalled, and a
// process already signalled is not signalled twice (a second SIGTERM means
// "quit now" to many programs).
type Sweep struct {
	fs   procfs
	root int
	Sig  syscall.Signal
	// group got sig from kill(-group) already; its members are skipped
	// unless sig is SIGKILL. 0: none.
	group int
	// Exclude names children of root that are left alone with all below
	// them.
	Exclude func(pid int) bool
	seen    map[int]int // pid -> pidfd, or -1 where the kernel has no pidfds
}

func NewSweep(root int, sig syscall.Signal, group int) *Sweep {
	return &Sweep{fs: hostProcfs(), root: root, Sig: sig, group: group, seen: make(map[int]int)}
}

// Run walks until a walk finds nothing new, or until boot-clock time
// until, which also cuts a walk short: a tree that forks faster than it
// can be walked must not hold the caller past it. It reports whether the
// sweep is done (its last walk found nothing new), and the first error
// other than ESRCH (a process may lack the permission to signal a setuid
// descendant). What a sweep cut short misses, the next run finds.
func (s *Sweep) Run(until time.Duration) (done bool, first error) {
	for {
		fresh, complete, err := s.walk(until)
		if first == nil {
			first = err
		}
		if complete && fresh == 0 {
			return true, first
		}
		if !complete || bootclock.Now() >= until {
			return false, first
		}
	}
}

// walk goes down from root breadth-first and deals with each process it has
// not seen: it checks that the process is the child of the parent it was
// listed under, then signals it. fresh counts those, and those re-parented
// while it read (the next walk finds them at their new place). complete is
// false when until came first.
func (s *Sweep) walk(until time.Duration) (fresh int, complete bool, first error) {
	children := s.fs.lister()
	type node struct{ pid, fd int }
	queue := []node{{s.root, -1}}
	for len(queue) > 0 {
		if bootclock.Now() >= until {
			return fresh, false, first
		}
		parent := queue[0]
		queue = queue[1:]
		for _, pid := range children(parent.pid) {
			if parent.pid == s.root && s.Exclude != nil && s.Exclude(pid) {
				continue
			}
			if fd, ok := s.seen[pid]; ok && pidfdAlive(fd) {
				queue = append(queue, node{pid, fd})
				continue
			}
			fd, st, err := s.claim(pid, parent.pid, parent.fd)
			if errors.Is(err, errMoved) {
				fresh++
			}
			if err != nil {
				continue
			}
			if old, ok := s.seen[pid]; ok && old >= 0 {
				unix.Close(old)
			}
			s.seen[pid] = fd
			fresh++
			if s.Sig == syscall.SIGKILL || s.group == 0 || st.Pgrp != s.group {
				if err := pidfdSignal(fd, pid, s.Sig); err != nil && !errors.Is(err, unix.ESRCH) && first == nil {
					first = fmt.Errorf("signal %d: %w", pid, err)
				}
			}
			queue = append(queue, node{pid, fd})
		}
	}
	return fresh, true, first
}

// errMoved is a process listed under one parent and found under another.
var errMoved = errors.New("re-parented")

// claim opens a pidfd on pid and confirms it is the child of parent (held by
// parentFD): a pid read from /proc may have died and been reused since.
// Confirmed in this order, the pidfd, then the parent in /proc, then the
// parent still alive, the pidfd holds the very process that was listed.
func (s *Sweep) claim(pid, parent, parentFD int) (int, Stat, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, Stat{}, err
	}
	if err != nil {
		fd = -1 // no pidfds (before Linux 5.3), or no descriptor left: by pid
	}
	st, err := s.fs.stat(pid)
	switch {
	case err != nil:
	case st.PPid != parent || !pidfdAlive(parentFD):
		err = errMoved
	default:
		return fd, st, nil
	}
	if fd >= 0 {
		unix.Close(fd)
	}
	return -1, Stat{}, err
}

// Close releases the pidfds.
func (s *Sweep) Close() {
	for _, fd := range s.seen {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	s.seen = nil
}

// pidfdAlive: the process has not been reaped (a zombie still holds its
// pid). Without a pidfd there is no telling, and the pid is trusted.
func pidfdAlive(fd int) bool {
	return fd < 0 || unix.PidfdSendSignal(fd, 0, nil, 0) == nil
}

func pidfdSignal(fd, pid int, sig syscall.Signal) error {
	if fd < 0 {
		return unix.Kill(pid, sig)
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

// ReadStat reads pid's parent and process group from the host's /proc.
func ReadStat(pid int) (Stat, error) { return hostProcfs().stat(pid) }

// Children lists pid's children as one walk of the host's /proc sees them.
func Children(pid int) []int { return hostProcfs().lister()(pid) }
