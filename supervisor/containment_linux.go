package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/supervisor/internal/proctree"
)

// Containment modes (docs/design.md, "Containment").
const (
	// ContainAuto takes a cgroup per child where one can be had, else the
	// process group and the walk of the tree.
	ContainAuto = "auto"
	// ContainCgroup demands a cgroup per child.
	ContainCgroup = "cgroup"
	// ContainProcessGroup is the child's process group, and every
	// descendant found by walking the process tree.
	ContainProcessGroup = "process-group"
)

// Containment is what holds the children of this process together, decided
// once by Contain.
type Containment struct {
	Mode string // ContainCgroup or ContainProcessGroup
	Dir  string // with ContainCgroup, this process's cgroup directory: one cgroup per child below it
	Why  string // why this mode
}

// ErrNoCgroup is a --containment=cgroup that cannot be had here; the error
// says why and what would give it.
var ErrNoCgroup = errors.New("no cgroup containment")

// contain is this process's containment and the cgroups it made.
var contain struct {
	sync.Mutex
	Containment
	terms int // term cgroups made, for their names
	// live counts the term cgroups made and not yet removed.
	live   sync.WaitGroup
	failed bool // a term's cgroup could not be made (logged once)
}

// minCloneIntoCgroup is the first kernel whose clone3 takes
// CLONE_INTO_CGROUP, which Go's SysProcAttr.UseCgroupFD needs: Go returns
// the error rather than start the child elsewhere.
var minCloneIntoCgroup = [2]int{5, 7}

// Contain decides how this process contains its children, once, before
// its first keeper starts: want is ContainAuto, ContainCgroup or
// ContainProcessGroup. With ContainCgroup, a cgroup that cannot be had is
// an error wrapping ErrNoCgroup. It also removes the cgroups of etcdlead
// processes that are gone, killing what still ran in them: nothing of a
// dead supervisor's terms may outlive it.
func Contain(want string, log hclog.Logger) (Containment, error) {
	contain.Lock()
	defer contain.Unlock()
	switch want {
	case ContainAuto, ContainCgroup:
	case ContainProcessGroup:
		contain.Containment = Containment{Mode: ContainProcessGroup, Why: "asked for (--containment=process-group)"}
		return contain.Containment, nil
	default:
		return Containment{}, fmt.Errorf("unknown containment %q", want)
	}
	base, err := cgroupBase()
	if err == nil {
		removeStale(base, log)
		var dir string
		if dir, err = makeInstanceDir(base); err == nil {
			contain.Containment = Containment{Mode: ContainCgroup, Dir: dir, Why: "cgroup v2 writable at " + base}
			return contain.Containment, nil
		}
	}
	if want == ContainCgroup {
		return Containment{}, fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	contain.Containment = Containment{Mode: ContainProcessGroup, Why: err.Error()}
	return contain.Containment, nil
}

// CgroupSupport says why this process could not contain its children in
// cgroups, or nil if it could: what Contain with ContainCgroup would find,
// without making anything.
func CgroupSupport() error {
	_, err := cgroupBase()
	return err
}

// releaseWait bounds how long ReleaseContainment waits for the terms'
// cgroups to be removed: a keeper that has reported leaves within its
// own bound on flushing its log.
const releaseWait = 2 * time.Second

// ReleaseContainment removes this process's cgroup once its terms' cgroups
// are removed, or releaseWait has passed; the process calls it on its way
// out, after its last child ended. What is left, the next etcdlead
// removes (removeStale).
func ReleaseContainment() {
	done := make(chan struct{})
	go func() {
		contain.live.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(releaseWait):
	}
	contain.Lock()
	defer contain.Unlock()
	if contain.Dir != "" {
		_ = proctree.Cgroup(contain.Dir).Remove()
	}
}

// termCgroups are the cgroups of one term: its child's, and its keeper's
// beside it. The keeper's is there so that a later etcdlead can tell a
// term whose keeper still stops its child (a populated keeper cgroup) from
// one whose supervisor and keeper are both gone (removeStale).
type termCgroups struct {
	dir, keeper, child proctree.Cgroup
}

// newTermCgroups makes the cgroups of a new term, or returns none for the
// process group: with process-group containment, or when they cannot be
// made (a depth or descendants limit, say), which is logged once and costs
// the term nothing but the kernel's help.
func newTermCgroups(log hclog.Logger) termCgroups {
	contain.Lock()
	defer contain.Unlock()
	if contain.Mode != ContainCgroup {
		return termCgroups{}
	}
	contain.terms++
	contain.live.Add(1)
	d := proctree.Cgroup(filepath.Join(contain.Dir, strconv.Itoa(contain.terms)))
	tc := termCgroups{dir: d, keeper: d.Sub("keeper"), child: d.Sub("child")}
	for _, m := range []proctree.Cgroup{tc.dir, tc.keeper, tc.child} {
		if err := os.Mkdir(string(m), 0o755); err != nil {
			_ = tc.dir.Remove()
			contain.live.Done()
			if !contain.failed {
				contain.failed = true
				log.Warn("cannot make the child's cgroup; containing it by its process group instead", "error", mkdirWhy(string(contain.Dir), err))
			}
			return termCgroups{}
		}
	}
	return tc
}

// remove removes a term's cgroups, which are empty, off the caller's way;
// ReleaseContainment waits for it. It is called once for each term's.
func (tc termCgroups) remove(log hclog.Logger) {
	if tc.dir == "" {
		return
	}
	go func() {
		defer contain.live.Done()
		if err := tc.dir.Remove(); err != nil {
			log.Warn("cannot remove the child's cgroup", "cgroup", string(tc.dir), "error", err)
		}
	}()
}

// intoCgroup makes a process start in the cgroup open as fd (-1: none).
func intoCgroup(attr *syscall.SysProcAttr, fd int) {
	if fd >= 0 {
		attr.UseCgroupFD, attr.CgroupFD = true, fd
	}
}

// cgroupBase is the directory of this process's own cgroup in the v2
// hierarchy, if this process may make cgroups below it; else an error
// that says why not and what would allow it.
func cgroupBase() (string, error) {
	if v := kernelVersion(); v[0] < minCloneIntoCgroup[0] || v[0] == minCloneIntoCgroup[0] && v[1] < minCloneIntoCgroup[1] {
		return "", fmt.Errorf("Linux %d.%d cannot start a process into a cgroup (5.7 and later can)", v[0], v[1])
	}
	own, err := ownCgroup()
	if err != nil {
		return "", err
	}
	mnt, err := cgroup2Mount(own)
	if err != nil {
		return "", err
	}
	if mnt.readOnly {
		return "", fmt.Errorf("the cgroup filesystem at %s is read-only (a container's default: give it a writable cgroup namespace)", mnt.point)
	}
	base := filepath.Join(mnt.point, strings.TrimPrefix(own, mnt.root))
	// systemd owns its tree: a process may make cgroups in it only where
	// systemd delegated them (Delegate=yes), which it marks on the
	// delegated cgroup itself.
	if systemdBooted() && !delegated(base, mnt.point) {
		return "", fmt.Errorf("cgroup %s is systemd's and not delegated: run etcdlead in a unit with Delegate=yes (or systemd-run --scope -p Delegate=yes)", own)
	}
	if err := unix.Access(base, unix.W_OK); err != nil {
		return "", fmt.Errorf("no permission to make cgroups in %s: run as root or in a unit with Delegate=yes", base)
	}
	return base, nil
}

// ownCgroup is this process's path in the v2 hierarchy ("0::PATH" in
// /proc/self/cgroup).
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("this process is in no cgroup v2 (no cgroup2 hierarchy mounted)")
}

type mount struct {
	root, point string
	readOnly    bool
}

// cgroup2Mount finds, in /proc/self/mountinfo, a cgroup2 mount that shows
// the cgroup own: where it is mounted varies (/sys/fs/cgroup, the unified
// mount of a hybrid host, a container's own), so no path is assumed.
func cgroup2Mount(own string) (mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mount{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fs, fp := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fs) < 6 || len(fp) < 1 || fp[0] != "cgroup2" {
			continue
		}
		root, point := unescapeMount(fs[3]), unescapeMount(fs[4])
		if root != "/" && own != root && !strings.HasPrefix(own, root+"/") {
			continue
		}
		ro := false
		for _, o := range strings.Split(fs[5], ",") {
			ro = ro || o == "ro"
		}
		if root == "/" {
			root = ""
		}
		return mount{root: root, point: point, readOnly: ro}, nil
	}
	return mount{}, errors.New("no cgroup2 filesystem is mounted")
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline and
// backslash.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// systemdBooted is sd_booted(3): systemd is this namespace's init.
func systemdBooted() bool {
	fi, err := os.Lstat("/run/systemd/system")
	return err == nil && fi.IsDir()
}

// delegated reports whether dir, or a cgroup above it below the mount
// point, is marked as delegated by systemd (the trusted.delegate or
// user.delegate extended attribute, systemd 251 and later).
func delegated(dir, point string) bool {
	for d := dir; d == point || strings.HasPrefix(d, point+"/"); d = filepath.Dir(d) {
		for _, attr := range []string{"trusted.delegate", "user.delegate"} {
			buf := make([]byte, 8)
			if n, err := unix.Getxattr(d, attr, buf); err == nil && string(buf[:n]) == "1" {
				return true
			}
		}
		if d == point {
			break
		}
	}
	return false
}

func kernelVersion() [2]int {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return [2]int{}
	}
	var v [2]int
	parts := strings.SplitN(unix.ByteSliceToString(u.Release[:]), ".", 3)
	for i := 0; i < 2 && i < len(parts); i++ {
		n := strings.IndexFunc(parts[i], func(r rune) bool { return r < '0' || r > '9' })
		if n < 0 {
			n = len(parts[i])
		}
		v[i], _ = strconv.Atoi(parts[i][:n])
	}
	return v
}

// instancePrefix names the cgroup of one etcdlead process:
// etcdlead-PID-START, START being the process's start time in clock ticks
// after boot (/proc/PID/stat), so that a later process can tell a
// directory of a live etcdlead from that of a dead one whose pid was reused.
const instancePrefix = "etcdlead-"

func makeInstanceDir(base string) (string, error) {
	start, err := startTime(os.Getpid())
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, fmt.Sprintf("%s%d-%d", instancePrefix, os.Getpid(), start))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", mkdirWhy(base, err)
	}
	return dir, nil
}

// mkdirWhy names what refused a cgroup, and the fix.
func mkdirWhy(base string, err error) error {
	switch {
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("the cgroup filesystem at %s is read-only (a container's default: give it a writable cgroup namespace)", base)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("no permission to make cgroups in %s: run as root or in a unit with Delegate=yes", base)
	case errors.Is(err, syscall.EAGAIN):
		return fmt.Errorf("%s allows no more cgroups below it (cgroup.max.depth or cgroup.max.descendants)", base)
	}
	return fmt.Errorf("cannot make a cgroup in %s: %w", base, err)
}

// startTime is field 22 of /proc/PID/stat.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// staleKillWait bounds the wait for what a dead etcdlead left in its
// cgroups to end after SIGKILL.
const staleKillWait = 5 * time.Second

// removeStale removes the cgroups in base of etcdlead processes that no
// longer run (killed, or dead before they could remove them). A process
// still in the child cgroup of a term whose keeper is gone too has nobody
// to stop it, and is killed. A term whose keeper still runs is left to it,
// since the keeper stops its child in order; but it is watched, and what
// the keeper leaves is killed once the keeper is gone: a keeper killed a
// moment ago may still be on its way out, and nobody else would look.
func removeStale(base string, log hclog.Logger) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), instancePrefix)
		pidS, startS, ok2 := strings.Cut(rest, "-")
		if !ok || !ok2 || !e.IsDir() {
			continue
		}
		pid, err1 := strconv.Atoi(pidS)
		start, err2 := strconv.ParseUint(startS, 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if now, err := startTime(pid); err == nil && now == start {
			continue // that etcdlead runs
		}
		inst := proctree.Cgroup(filepath.Join(base, e.Name()))
		terms, _ := os.ReadDir(string(inst))
		for _, term := range terms {
			if !term.IsDir() {
				continue
			}
			d := inst.Sub(term.Name())
			if keeperRuns, _ := d.Sub("keeper").Populated(); keeperRuns {
				go func() {
					awaitEmpty(d.Sub("keeper"))
					removeStaleTerm(d, log)
					_ = unix.Rmdir(string(inst))
				}()
				continue
			}
			removeStaleTerm(d, log)
		}
		_ = unix.Rmdir(string(inst))
	}
}

// removeStaleTerm kills what is left in the child cgroup of a term whose
// supervisor and keeper are both gone, and removes the term's cgroups.
func removeStaleTerm(d proctree.Cgroup, log hclog.Logger) {
	child := d.Sub("child")
	if busy, _ := child.Populated(); busy {
		_ = child.Kill()
		left := !child.Await(staleKillWait, child.Empty)
		log.Warn("killed what a dead etcdlead left in its cgroup", "cgroup", string(child), "still_running", left)
	}
	_ = d.Remove()
}

// awaitEmpty returns once no process is in d, however long that takes: a
// keeper ends when its child has, or at its fence.
func awaitEmpty(d proctree.Cgroup) {
	for !d.Await(time.Minute, d.Empty) {
	}
}
