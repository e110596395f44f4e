package e2e

import "testing"

// TestKubernetesManifests runs the tests of deploy/kubernetes, a module of
// its own that `go test ./...` here does not enter: the example manifests
// decoded strictly into the Kubernetes API types, their rollout arithmetic
// and the role-label hook (deploy/kubernetes/manifests_test.go).
func TestKubernetesManifests(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // it compiles while other tests wait
	testModule(t, "deploy/kubernetes")
}
