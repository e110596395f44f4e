//go:build !etcdlead_trace

package trace

import (
	"os"
	"os/exec"
	"testing"

	"github.com/hashicorp/go-hclog"
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

// Without the tag the hook hands the logger back as it is, even with the
// variable set: nothing is stamped and nothing is paid per line.
func TestUntracedHookIsTheLogger(t *testing.T) {
	t.Setenv(Var, t.TempDir()+"/trace")
	l := hclog.NewNullLogger()
	if Hook(l) != l {
		t.Fatal("an untraced build wraps the logger")
	}
}
