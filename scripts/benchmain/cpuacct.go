package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
)

// cpuGroups measures what CPU each tool's processes use inside the handoff
// windows: every candidate of a tool starts in a cgroup of the bench's own,
// whose cpu.stat counts the CPU of every process that ran in it (its
// keepers and children too, and those that exited since), in microseconds.
// On two cores the windows are as much a matter of CPU as of round trips:
// here the old leader's end and the new leader's start share one machine.
// Where no cgroup2 hierarchy can be written (not root), the figure is left
// out.
type cpuGroups struct {
	dir string
	fds map[string]int
}

// newCPUGroups makes a cgroup per key below the bench's own; nil, with the
// reason, when it cannot.
func newCPUGroups(keys []string) (*cpuGroups, error) {
	base, err := ownCgroupDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(base, "bench-cpu-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	g := &cpuGroups{dir: dir, fds: map[string]int{}}
	for _, k := range keys {
		sub := filepath.Join(dir, k)
		if err := os.Mkdir(sub, 0o755); err != nil {
			g.close()
			return nil, err
		}
		fd, err := unix.Open(sub, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			g.close()
			return nil, err
		}
		g.fds[k] = fd
	}
	return g, nil
}

// fd is key's cgroup, for spawnOpts.cgroup; 0 when there is none.
func (g *cpuGroups) fd(key string) int {
	if g == nil {
		return 0
	}
	return g.fds[key]
}

// usage is the CPU used so far in key's cgroup.
func (g *cpuGroups) usage(key string) time.Duration {
	if g == nil {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(g.dir, key, "cpu.stat"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
			us, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(us) * time.Microsecond
		}
	}
	return 0
}

// close removes the cgroups once every process in them is gone; what an
// etcdlead killed with -9 left below is killed and removed too.
func (g *cpuGroups) close() {
	if g == nil {
		return
	}
	for _, fd := range g.fds {
		unix.Close(fd)
	}
	if err := proctest.RemoveCgroupTree(g.dir); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
}

// threadsCPU is the CPU process pid's live threads have used, from their
// schedstat (nanoseconds): for etcd, whose threads outlive the handoff
// windows, and for the idle processes of the footprint.
func threadsCPU(pid int) time.Duration {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// ownCgroupDir is the bench's own cgroup in the cgroup2 hierarchy, where
// it may make cgroups.
func ownCgroupDir() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	own := ""
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			own = p
		}
	}
	if own == "" {
		return "", errors.New("no cgroup2 hierarchy")
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 || !strings.HasPrefix(own, f[3]) {
			continue
		}
		dir := filepath.Join(f[4], strings.TrimPrefix(own, f[3]))
		if err := unix.Access(dir, unix.W_OK); err != nil {
			return "", fmt.Errorf("%s: %w", dir, err)
		}
		return dir, nil
	}
	return "", errors.New("no cgroup2 mount holds this process's cgroup")
}
