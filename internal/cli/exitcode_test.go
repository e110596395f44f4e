package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/etcdlead/etcdlead/internal/exitcode"
	"github.com/etcdlead/etcdlead/internal/runner"
)

// readmeTable returns the rows of the first table under heading in
// README.md, each as its cells.
func readmeTable(t *testing.T, heading string) [][]string {
	t.Helper()
	var rows [][]string
	for _, line := range strings.Split(readmeSection(t, heading), "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	if len(rows) < 3 {
		t.Fatalf("README.md: no table under %q", heading)
	}
	return rows[2:] // below the header and its rule
}

func run(k runner.Kind, code int, err error) error {
	return &runEnd{Outcome: &runner.Outcome{Kind: k, Code: code, Err: err}, conflictCode: exitcode.Conflict}
}

var errX = errors.New("x")

type exitCase struct {
	name string
	err  error
	want int
	msg  string // the one line printed, "" for none
}

// exitRows are README.md's "Exit codes" table, by its first column: every
// end that row names, with the code exitCode must give it.
var exitRows = map[string][]exitCase{
	"the child's code, or 128+N": {
		{"child exited 0", run(runner.ChildExited, 0, nil), 0, ""},
		{"child exited 3", run(runner.ChildExited, 3, nil), 3, ""},
		{"child killed by SIGKILL", run(runner.ChildExited, 137, nil), 137, ""},
		{"child stopped by SIGTERM", run(runner.Stopped, 143, nil), 143, ""},
		{"child obeyed SIGTERM with 0", run(runner.Stopped, 0, nil), 0, ""},
	},
	"3": {
		{"status: no leader", withCode(exitcode.NoLeader, nil), 3, ""},
		{"resign: --id does not lead", withCode(exitcode.NoLeader, errX), 3, "x"},
	},
	"75": {
		{"not leader", run(runner.NotLeader, 0, errX), 75, "x"},
		{"not leader, --conflict-exit-code 0: silent", &runEnd{Outcome: &runner.Outcome{Kind: runner.NotLeader, Err: errX}, conflictCode: 0}, 0, ""},
		{"not leader, --conflict-exit-code 9", &runEnd{Outcome: &runner.Outcome{Kind: runner.NotLeader, Err: errX}, conflictCode: 9}, 9, "x"},
	},
	"76": {
		{"--once: leadership lost", run(runner.LostOnce, 143, nil), 76, ""},
	},
	"124": {
		{"--timeout", run(runner.TimedOut, 143, nil), 124, ""},
	},
	"125": {
		{"bad flag", failf("x"), 125, "x"},
		{"refused", run(runner.Refused, 0, errX), 125, "x"},
		{"unreachable", run(runner.Unreachable, 0, errX), 125, "x"},
		{"keeper lost", run(runner.KeeperLost, 137, errX), 125, "x"},
		{"keeper not started", run(runner.Failed, 0, errX), 125, "x"},
		{"any other error", errX, 125, "x"},
	},
	"126 / 127": {
		{"not executable, found at start", withCode(exitcode.CannotExec, errX), 126, "x"},
		{"not found at start", withCode(exitcode.NotFound, errX), 127, "x"},
		{"not executable at exec", run(runner.ExecFailed, 126, errX), 126, "x"},
		{"gone at exec", run(runner.ExecFailed, 127, errX), 127, "x"},
	},
}

func TestExitCodesFollowReadme(t *testing.T) {
	seen := map[string]bool{}
	for _, row := range readmeTable(t, "## Exit codes") {
		key := row[0]
		seen[key] = true
		cases, ok := exitRows[key]
		if !ok {
			t.Errorf("README row %q has no cases here: add them to exitRows", key)
			continue
		}
		t.Run(key, func(t *testing.T) {
			for _, c := range cases {
				if got := exitCode(c.err); got != c.want {
					t.Errorf("%s: exitCode = %d, want %d", c.name, got, c.want)
				}
				if got := errorMessage(c.err); got != c.msg {
					t.Errorf("%s: message %q, want %q", c.name, got, c.msg)
				}
			}
		})
	}
	for key := range exitRows {
		if !seen[key] {
			t.Errorf("exitRows has %q, which README.md's table lacks", key)
		}
	}
}

// The ends the table does not list: success and a stop with no child.
func TestExitCodeZero(t *testing.T) {
	for _, err := range []error{nil, run(runner.Stopped, 0, nil)} {
		if got := exitCode(err); got != 0 {
			t.Errorf("exitCode(%v) = %d, want 0", err, got)
		}
		if msg := errorMessage(err); msg != "" {
			t.Errorf("errorMessage(%v) = %q, want none", err, msg)
		}
	}
}

// Every kind of run end has a code: a kind added without one would fall
// through to 125 unseen.
func TestEveryOutcomeKindIsInTheTable(t *testing.T) {
	covered := map[runner.Kind]bool{}
	for _, cases := range exitRows {
		for _, c := range cases {
			var end *runEnd
			if errors.As(c.err, &end) {
				covered[end.Kind] = true
			}
		}
	}
	for k := runner.ChildExited; k <= runner.Failed; k++ {
		if !covered[k] {
			t.Errorf("runner.%v has no row in exitRows", k)
		}
	}
}
