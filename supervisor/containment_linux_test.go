package supervisor

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/supervisor/internal/proctree"
)

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/sys/fs/cgroup`:          "/sys/fs/cgroup",
		`/mnt/with\040space`:      "/mnt/with space",
		`/a\011tab\012nl\134back`: "/a\ttab\nnl\\back",
		`/trailing\04`:            `/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// systemd marks the cgroups it delegates with an extended attribute; a
// cgroup below one is delegated too, one beside it is not.
func TestDelegatedByAttribute(t *testing.T) {
	base, err := cgroupBase()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cgroup containment unavailable under CI: %v", err)
		}
		t.Skipf("cgroup containment unavailable: %v", err)
	}
	mnt, err := cgroup2Mount("/")
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(base, "delegation-test-"+strconv.Itoa(os.Getpid()))
	other := unit + "-other"
	for _, d := range []string{unit, filepath.Join(unit, "below"), other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = proctree.Cgroup(unit).Remove()
		_ = proctree.Cgroup(other).Remove()
	})
	if delegated(unit, mnt.point) {
		t.Fatal("a cgroup with no mark is taken for delegated")
	}
	if err := unix.Setxattr(unit, "trusted.delegate", []byte("1"), 0); err != nil {
		t.Fatalf("cannot mark %s: %v", unit, err)
	}
	if !delegated(unit, mnt.point) || !delegated(filepath.Join(unit, "below"), mnt.point) {
		t.Error("a delegated cgroup, or one below it, is not taken for delegated")
	}
	if delegated(other, mnt.point) {
		t.Error("a cgroup beside a delegated one is taken for delegated")
	}
}
