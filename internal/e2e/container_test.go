package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// inContainer starts `etcdlead run` as PID 1 of a new PID namespace with its
// own /proc, as a container's entrypoint runs (docs/containers.md, "In a
// container"), and returns it with etcdlead's pid as the host sees it.
func (e *env) inContainer(t *testing.T, name string, flags, command []string) (*candidate, int) {
	t.Helper()
	needRoot(t, "a PID namespace")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare(1) is needed to start a PID namespace: %v", err)
	}
	args := []string{"--pid", "--fork", "--mount-proc", etcdleadBin(), "run",
		"--endpoints=" + strings.Join(e.endpoints, ","), "--prefix=" + e.prefix, "--id=" + name}
	args = append(append(append(args, flags...), "--"), command...)
	c := e.launch(name, exec.Command(unshare, args...))
	// unshare's one child is etcdlead, PID 1 inside.
	var pid int
	for deadline := time.Now().Add(safety); pid == 0; time.Sleep(time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/task/" + strconv.Itoa(c.cmd.Process.Pid) + "/children")
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			t.Fatal("unshare started no etcdlead")
		}
	}
	return c, pid
}

// needRoot fails the test under CI, which runs as root, and skips it
// elsewhere, unless it runs as root.
func needRoot(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s needs root, and CI runs as root", what)
	}
	t.Skipf("%s needs root", what)
}

// As a container's entrypoint, PID 1 of its PID namespace, etcdlead does
// what PID 1 must: it reaps an orphan that the kernel hands it (a process
// started by `docker exec` whose parent ended, here one started with
// nsenter), passes a SIGTERM from outside to its child, and exits with the
// child's status.
func TestContainerEntrypoint(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c, pid := e.inContainer(t, "c1", fast, e.probe())
	c.out.waitFor(t, "c1", "ready", 0)
	if ns, host := nsPid(t, "self"), nsPid(t, strconv.Itoa(pid)); ns == host {
		t.Fatal("etcdlead runs in the test's own PID namespace")
	}
	if got := readNSFile(t, pid, "/proc/1/cmdline"); !strings.Contains(got, "etcdlead") {
		t.Fatalf("PID 1 of the namespace is %q, want etcdlead", got)
	}

	// An orphan in the namespace: its parent (sh) exits at once, so the
	// kernel re-parents it to PID 1. Once it has exited it must be reaped,
	// not left a zombie of etcdlead's.
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-p", "-m", "--",
		"sh", "-c", "sleep 0.1 & echo $!").Output()
	if err != nil {
		t.Fatalf("nsenter: %v", err)
	}
	orphan := strings.TrimSpace(string(out))
	for deadline := time.Now().Add(safety); ; time.Sleep(10 * time.Millisecond) {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "root/proc", orphan, "stat"))
		if err != nil {
			break // reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("the orphan %s is not reaped %v after its start: %s", orphan, safety, stat)
		}
	}

	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.out.waitFor(t, "c1", "signal SIGTERM", 0)
	if code := c.exit(t); code != 143 {
		t.Errorf("etcdlead as PID 1 exited %d after its child obeyed SIGTERM, want the child's 143", code)
	}
}

// A child's own exit status is the entrypoint's, as the container's.
func TestContainerEntrypointExitStatus(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c, _ := e.inContainer(t, "c1", append([]string{"--once"}, fast...), e.probe("-exit", "7"))
	if code := c.exit(t); code != 7 {
		t.Errorf("etcdlead as PID 1 exited %d, want its child's 7", code)
	}
}

func nsPid(t *testing.T, pid string) string {
	t.Helper()
	l, err := os.Readlink("/proc/" + pid + "/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// readNSFile reads a file as the namespace of pid sees it.
func readNSFile(t *testing.T, pid int, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "root", path))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "\x00", " ")
}
