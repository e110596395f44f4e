package supervisor

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// buildKeeper builds cmd/etcdlead-keeper into dir, with extra go build
// flags.
func buildKeeper(t testing.TB, dir string, flags ...string) string {
	t.Helper()
	out := filepath.Join(dir, KeeperName)
	args := append([]string{"build", "-race=false", "-o", out}, flags...)
	cmd := exec.Command("go", append(args, "github.com/etcdlead/etcdlead/cmd/etcdlead-keeper")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", KeeperName, err, b)
	}
	return out
}

// useKeeperDir makes dir where keepers are looked for, as if this process
// had just started.
func useKeeperDir(t testing.TB, dir string) {
	reset := func() {
		keeperExe.Lock()
		keeperExe.decided, keeperExe.path, keeperExe.why = false, "", ""
		keeperExe.Unlock()
	}
	old := KeeperDir
	KeeperDir = dir
	reset()
	t.Cleanup(func() {
		KeeperDir = old
		reset()
	})
}
