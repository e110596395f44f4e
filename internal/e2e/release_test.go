package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReleaseModule runs the tests of scripts/releasemain, the release's
// module of its own, which `go test ./...` here does not enter: the
// packages built from a release, the template unit, the OCI image (its
// etcdlead run as PID 1), the SBOMs, reproducibility, and a module build's
// --version (scripts/releasemain/*_test.go).
func TestReleaseModule(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // it compiles while other tests wait
	testModule(t, "scripts/releasemain")
}

// testModule runs the tests of a module of its own in the repository,
// at dir from its root.
func testModule(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("go", "test", "-count=1", "-v", ".")
	cmd.Dir = "../../" + dir
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	t.Logf("go test in %s:\n%s", dir, out)
	if err != nil {
		t.Fatalf("%s's tests failed: %v", dir, err)
	}
}

// TestHardeningDropInKeepsContainment runs containment tests again inside
// the sandbox that the packages' hardening drop-in
// (scripts/releasemain/hardening.conf) asks of systemd, as far as one can be
// had without systemd as init: its file-system settings as the mounts
// systemd would make, in a mount namespace of its own, and
// NoNewPrivileges=. The drop-in's system call filter is checked by the
// release test against the calls etcdlead makes; ProtectHome= is not
// applied, because the Go build cache the inner run needs is in the home.
// It needs root, for the namespace and the cgroups: under CI, which has
// it, its absence fails the test.
func TestHardeningDropInKeepsContainment(t *testing.T) {
	skipIfShort(t)
	needRoot(t, "the sandbox's mount namespace, and the cgroups,")
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s (util-linux) is missing: %v", tool, err)
		}
	}
	conf, err := os.ReadFile("../../scripts/releasemain/hardening.conf")
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{}
	for _, line := range strings.Split(string(conf), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			set[k] = v
		}
	}
	// Each setting as systemd applies it (systemd.exec(5)); the drop-in
	// must keep at least these, or this test tests nothing.
	want := map[string]string{"ProtectSystem": "strict", "ProtectKernelTunables": "yes",
		"PrivateTmp": "yes", "NoNewPrivileges": "yes"}
	for k, v := range want {
		if set[k] != v {
			t.Fatalf("hardening.conf has %s=%q, not %q, which this test applies", k, set[k], v)
		}
	}
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	userCache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	// ProtectSystem=strict: every mount read-only but /dev, /proc and /sys.
	// ProtectKernelTunables=yes: /sys and /proc/sys read-only too, the
	// cgroup tree left writable (ProtectControlGroups= would make it
	// read-only, and is applied if the drop-in ever sets it, so that this
	// test sees the fallback it forces). PrivateTmp=yes: a /tmp of its own.
	// Then the caches the inner run builds with, writable as ReadWritePaths=
	// would leave them. The script checks that it got what it asked for.
	script := `set -eu
mounts() { awk '$5 !~ /\\/ {print $5}' /proc/self/mountinfo | sort -u; }
for mp in $(mounts); do
  case $mp in /proc|/proc/*|/dev|/dev/*) continue ;; /sys/fs/cgroup|/sys/fs/cgroup/*) [ "$CGROUP_RO" = yes ] || continue ;; esac
  mount -o remount,bind,ro "$mp"
done
mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys
exec 9<"$1"  # the test binary, which go test keeps in /tmp
exec 8<"$MODULE_DIR"  # the checkout, which the inner run builds from
mount -t tmpfs tmpfs /tmp
cat <&9 >/tmp/e2e.test && chmod +x /tmp/e2e.test && exec 9<&-
case $MODULE_DIR in /tmp/*) mkdir -p "$MODULE_DIR" && mount --no-canonicalize --bind /proc/self/fd/8 "$MODULE_DIR" ;; esac
exec 8<&-
shift
for dir in "$GOCACHE_DIR" "$USER_CACHE_DIR"; do
  mkdir -p "$dir" 2>/dev/null || :
  mount --bind "$dir" "$dir" && mount -o remount,bind,rw "$dir"
done
opts() { awk -v m="$1" '$5 == m {o = $6} END {print o}' /proc/self/mountinfo; }
for mp in / /sys /proc/sys; do
  case $(opts "$mp") in ro,*) ;; *) echo "sandbox: $mp is not read-only" >&2; exit 1 ;; esac
done
exec setpriv --no-new-privs /tmp/e2e.test "$@"
`
	// The caches must exist before / turns read-only.
	for _, dir := range []string{strings.TrimSpace(string(gocache)), userCache} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sandbox",
		os.Args[0], "-test.run", "^(TestForkChurningTreeFenced|TestContainmentShownAndCleanedUp)$", "-test.count=1", "-test.v")
	cgroupRO := "no"
	if v := set["ProtectControlGroups"]; v == "yes" || v == "true" {
		cgroupRO = "yes"
	}
	module, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// A checkout under /tmp (a CI clone, say) stays in the sandbox's view.
	cmd.Env = append(os.Environ(), "GOCACHE_DIR="+strings.TrimSpace(string(gocache)), "USER_CACHE_DIR="+userCache,
		"CGROUP_RO="+cgroupRO, "MODULE_DIR="+module)
	out, err := cmd.CombinedOutput()
	t.Logf("containment tests in the sandbox of hardening.conf:\n%s", out)
	if err != nil {
		t.Fatalf("containment tests in the sandbox of hardening.conf: %v", err)
	}
	// The cgroup runs must have run, not skipped: a sandbox that forced
	// the fallback would pass on the process group alone.
	for _, pass := range []string{"--- PASS: TestForkChurningTreeFenced/cgroup ", "--- PASS: TestContainmentShownAndCleanedUp/cgroup "} {
		if !strings.Contains(string(out), pass) {
			t.Errorf("no %q in the sandbox's run", strings.TrimSpace(pass))
		}
	}
}
