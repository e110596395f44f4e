//go:build !etcdlead_trace

package trace

import (
	"os"
	"os/exec"
	"testing"
)

// The marks are tested where they exist, in the traced build (trace_test.go),
// which this runs: the README's test command builds without the tag, and
// the bench relies on the traced build's lines.
func TestTracedBuild(t *testing.T) {
	cmd := exec.Command("go", "test", "-count=1", "-tags", "etcdlead_trace", ".")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go test -tags etcdlead_trace: %v", err)
	}
}

// Without the tag a mark writes nothing, even with the variable set.
func TestUntracedIgnoresTheVariable(t *testing.T) {
	t.Setenv(Var, t.TempDir()+"/trace")
	Mark("x")
	MarkInt("x", "k", 1)
	if Enabled() {
		t.Fatal("an untraced build reports tracing on")
	}
	if _, err := os.Stat(os.Getenv(Var)); !os.IsNotExist(err) {
		t.Fatalf("an untraced build wrote the trace file: %v", err)
	}
}
