package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// TestScripts runs the CLI scripts in testdata/script against the built
// binary and one real etcd; each script gets a prefix of its own.
func TestScripts(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	var n atomic.Int64
	testscript.Run(t, testscript.Params{
		Dir: "../../testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			env.Setenv("ETCDLEAD_ENDPOINTS", strings.Join(cluster.Endpoints(), ","))
			env.Setenv("ETCDLEAD_PREFIX", fmt.Sprintf("script/%d/", n.Add(1)))
			env.Setenv("ETCDLEAD_TTL", "2s")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"status": cmdStatus,
		},
	})
}

// cmdStatus runs a command and checks its exact exit code:
//
//	status CODE command [args...]
//
// Its stdout and stderr are then checked with the usual stdout and stderr.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status CODE command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("status: %q is not a code", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("status: %v", err)
	}
	if got != want {
		ts.Fatalf("exit code %d, want %d", got, want)
	}
}
