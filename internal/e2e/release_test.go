package e2e

import (
	"os"
	"os/exec"
	"testing"
)

// TestReleaseModule runs the tests of scripts/releasemain, the release's
// module of its own, which `go test ./...` here does not enter: the
// packages built from a release, the template unit, reproducibility, and a
// module build's --version (scripts/releasemain/*_test.go).
func TestReleaseModule(t *testing.T) {
	t.Parallel() // it compiles while other tests wait
	cmd := exec.Command("go", "test", "-count=1", "-v", ".")
	cmd.Dir = "../../scripts/releasemain"
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	t.Logf("go test in scripts/releasemain:\n%s", out)
	if err != nil {
		t.Fatalf("scripts/releasemain's tests failed: %v", err)
	}
}
