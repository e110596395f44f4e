package proctest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv names, in a re-executed test binary, the cgroup it is to enter.
const helperEnv = "PROCTEST_THREAD_IN"

// A cgroup can hold a thread while its cgroup.procs names no process: the
// last threads of a process whose leader has exited, which the e2e
// harness met as a keeper exited beside its clean-up. Here a helper keeps
// one thread in a threaded cgroup, its leader outside it, and exits by
// itself shortly after: the removal must wait for it, not give up.
func TestRemoveCgroupTreeWaitsForTheLastThread(t *testing.T) {
	if dir := os.Getenv(helperEnv); dir != "" {
		threadHelper(dir)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	root, err := Cgroup2Root()
	if err != nil {
		t.Skip(err)
	}
	p := filepath.Join(root, "etcdlead-proctest-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	t.Cleanup(func() { _ = RemoveCgroupTree(p) })
	th := filepath.Join(p, "T")
	if err := os.Mkdir(th, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(th, "cgroup.type"), []byte("threaded"), 0); err != nil {
		t.Skipf("no threaded cgroups here: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRemoveCgroupTreeWaitsForTheLastThread$")
	cmd.Env = append(os.Environ(), helperEnv+"="+p)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Registered after the cgroup's removal, so it runs before it.
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("helper said %q", line)
	}
	if procs, _ := os.ReadFile(filepath.Join(th, "cgroup.procs")); strings.TrimSpace(string(procs)) != "" {
		t.Fatalf("the case needs a cgroup.procs that names nothing; it names %q", procs)
	}
	if err := RemoveCgroupTree(th); err != nil {
		t.Fatal(err)
	}
}

// threadHelper moves this process into dir and one locked thread into its
// threaded child T, says ready, and exits from that thread a little later.
func threadHelper(dir string) {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		os.Exit(2)
	}
	moved := make(chan error)
	go func() {
		runtime.LockOSThread()
		moved <- os.WriteFile(filepath.Join(dir, "T", "cgroup.threads"), []byte(strconv.Itoa(unix.Gettid())), 0)
		// Long enough for the removal to find the thread there: the
		// scenario, not a synchronisation.
		time.Sleep(200 * time.Millisecond)
		os.Exit(0)
	}()
	if err := <-moved; err != nil {
		os.Exit(2)
	}
	os.Stdout.WriteString("ready\n")
	select {}
}
