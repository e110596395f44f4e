package etcdtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The binaries are cached on disk, keyed by everything that decides their
// content, so that the test binaries of several packages (which go test runs
// as separate processes, often at the same time) share one build instead of
// each linking a 40 MB executable. sync.OnceValues saves the hashing and the
// stat on every further call within one process.
var (
	etcdBinary = sync.OnceValues(func() (string, error) {
		return buildCached("etcd", "./testdata/etcd", "testdata/etcd/main.go")
	})
	etcdctlBinary = sync.OnceValues(func() (string, error) {
		return buildCached("etcdctl", "go.etcd.io/etcd/etcdctl/v3")
	})
)

// EtcdBinary returns the path of an etcd server executable built from
// ./testdata/etcd at the version pinned in go.mod, building it if needed.
func EtcdBinary(tb testing.TB) string {
	tb.Helper()
	path, err := etcdBinary()
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	return path
}

// EtcdctlBinary returns the path of an etcdctl executable at the version
// pinned in go.mod (a tool dependency), building it if needed.
func EtcdctlBinary(tb testing.TB) string {
	tb.Helper()
	path, err := etcdctlBinary()
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	return path
}

// buildCached returns <cache>/etcdlead-test/<name>-<key>, running go build for
// pkg from the module root when that file does not exist yet. extraInputs are
// module-relative files that feed the key besides go.mod and go.sum.
func buildCached(name, pkg string, extraInputs ...string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !filepath.IsAbs(lines[0]) {
		return "", fmt.Errorf("go env: not inside a module: %q", out)
	}
	root, goVersion := filepath.Dir(lines[0]), lines[1]

	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s/%s\n", pkg, goVersion, runtime.GOOS, runtime.GOARCH)
	for _, f := range append([]string{"go.mod", "go.sum"}, extraInputs...) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}

	dir := cacheDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}

	// go test runs packages in parallel processes that all miss the cache
	// at first; without the lock each would compile etcd itself, which on
	// a cold Go build cache takes minutes. Flock is released if the
	// process dies, so a crashed build cannot wedge later runs.
	lock, err := os.OpenFile(filepath.Join(dir, name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if _, err := os.Stat(path); err == nil {
		return path, nil // built by another process while this one waited
	}

	// Build beside the final name and rename, so that a process that
	// found the file without taking the lock never runs a half-written
	// one, and an interrupted build leaves no entry that looks complete.
	tmp, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())

	// -race=false wins over a -race in GOFLAGS: a race-instrumented etcd is
	// several times slower and would only make timing-sensitive tests flaky.
	cmd := exec.Command("go", "build", "-race=false", "-o", tmp.Name(), pkg)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, stderr.Bytes())
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}

func cacheDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		// No HOME (some CI sandboxes): a per-user directory in the temp
		// dir still lets the processes of one run share the build.
		return filepath.Join(os.TempDir(), fmt.Sprintf("etcdlead-test-%d", os.Getuid()))
	}
	return filepath.Join(base, "etcdlead-test")
}
