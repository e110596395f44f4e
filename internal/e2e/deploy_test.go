package e2e

import (
	"os"
	"os/exec"
	"testing"
)

// TestKubernetesManifests runs the tests of deploy/kubernetes, a module of
// its own that `go test ./...` here does not enter: the example manifests
// decoded strictly into the Kubernetes API types, their rollout arithmetic
// and the role-label hook (deploy/kubernetes/manifests_test.go).
func TestKubernetesManifests(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // it compiles while other tests wait
	cmd := exec.Command("go", "test", "-count=1", "-v", ".")
	cmd.Dir = "../../deploy/kubernetes"
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	t.Logf("go test in deploy/kubernetes:\n%s", out)
	if err != nil {
		t.Fatalf("deploy/kubernetes's tests failed: %v", err)
	}
}
