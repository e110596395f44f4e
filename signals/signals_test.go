package signals

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The caught signals by kind, written out here apart from the package's
// table: TestCaughtSignals holds the two together.
var (
	stopSignals    = []syscall.Signal{syscall.SIGTERM, syscall.SIGINT}
	messageSignals = []syscall.Signal{syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGQUIT, syscall.SIGWINCH}
	jobSignals     = []syscall.Signal{syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU}
	allPhases      = []Phase{Campaigning, BackingOff, Leading, Stopping, Holding}
)

func TestCaughtSignals(t *testing.T) {
	var want []syscall.Signal
	want = append(append(append(want, stopSignals...), messageSignals...), jobSignals...)
	var got []syscall.Signal
	for s := range table {
		got = append(got, s)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("caught signals %v, the tests know %v: a signal added or removed needs its row in TestDecide", got, want)
	}
	for p := Campaigning; p < endPhase; p++ {
		if !slices.Contains(allPhases, p) {
			t.Fatalf("phase %v missing from the tests", p)
		}
	}
}

// Every (phase, caught signal) pair.
func TestDecide(t *testing.T) {
	want := map[Phase]struct{ stop, message, job Action }{
		Campaigning: {Exit, IgnoreNoChild, IgnoreStopped},
		BackingOff:  {Exit, IgnoreNoChild, IgnoreStopped},
		Leading:     {StopChild, Forward, IgnoreStopped},
		Stopping:    {KillChild, Forward, IgnoreStopped},
		Holding:     {Exit, IgnoreNoChild, IgnoreStopped},
	}
	for _, p := range allPhases {
		w, ok := want[p]
		if !ok {
			t.Fatalf("no expectation for phase %v", p)
		}
		for _, g := range []struct {
			sigs []syscall.Signal
			want Action
		}{{stopSignals, w.stop}, {messageSignals, w.message}, {jobSignals, w.job}} {
			for _, s := range g.sigs {
				if got := Decide(p, s); got != g.want {
					t.Errorf("Decide(%v, %s) = %v, want %v", p, Name(s), got, g.want)
				}
			}
		}
	}
}

type otherSignal struct{}

func (otherSignal) String() string { return "other" }
func (otherSignal) Signal()        {}

// What is never caught does nothing but a log line, in every phase.
func TestDecideUncaught(t *testing.T) {
	for _, p := range allPhases {
		for _, s := range []os.Signal{syscall.SIGPIPE, syscall.SIGCHLD, otherSignal{}} {
			if got := Decide(p, s); got != IgnoreStopped {
				t.Errorf("Decide(%v, %v) = %v, want %v", p, s, got, IgnoreStopped)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Decide in an unknown phase did not panic")
		}
	}()
	Decide(Phase(0), syscall.SIGTERM)
}

func TestNamesAndReasons(t *testing.T) {
	for p := Campaigning; p < endPhase; p++ {
		if s := p.String(); s == "" || strings.HasPrefix(s, "Phase(") {
			t.Errorf("phase %d has no name", int(p))
		}
	}
	reasons := map[Action]string{
		IgnoreNoChild: "signal ignored: no child runs",
		IgnoreStopped: "signal ignored: a stopped supervisor would lose its lease",
	}
	for a := Exit; a < endAction; a++ {
		if s := a.String(); s == "" || strings.HasPrefix(s, "Action(") {
			t.Errorf("action %d has no name", int(a))
		}
		if got := a.Reason(); got != reasons[a] {
			t.Errorf("%v.Reason() = %q, want %q", a, got, reasons[a])
		}
	}
	if got := Phase(99).String(); got != "Phase(99)" {
		t.Errorf("Phase(99).String() = %q", got)
	}
}

// readmeClaim is what a row of README.md's "## Signals" table claims: in
// these phases, these signals get this action.
type readmeClaim struct {
	row    string // the row's exact text
	phases []Phase
	sigs   []syscall.Signal
	want   Action
}

var readmeRows = []readmeClaim{
	{
		"| SIGTERM / SIGINT, child running | forwards it to the child's process group; SIGKILL after `--kill-timeout`; revokes the lease; exits with the child's status |",
		[]Phase{Leading}, stopSignals, StopChild,
	},
	{
		"| a second SIGTERM / SIGINT | SIGKILLs the group at once |",
		[]Phase{Stopping}, stopSignals, KillChild,
	},
	{
		"| SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT, SIGWINCH | forwarded to the child's group |",
		[]Phase{Leading, Stopping}, messageSignals, Forward,
	},
	{
		"| SIGTSTP, SIGTTIN, SIGTTOU | ignored, with a log line, in every phase: a stopped supervisor would stop renewing its lease, and the fence would kill its child |",
		allPhases, jobSignals, IgnoreStopped,
	},
	{
		"| SIGTERM / SIGINT, no child | stops campaigning, revokes, exits 0 |",
		[]Phase{Campaigning, BackingOff, Holding}, stopSignals, Exit,
	},
	{
		"| SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT, SIGWINCH, no child | ignored, with a log line |",
		[]Phase{Campaigning, BackingOff, Holding}, messageSignals, IgnoreNoChild,
	},
}

// signalsTable returns the body rows of the first table under "## Signals".
func signalsTable(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Signals\n")
	if !ok {
		t.Fatalf("%s has no \"## Signals\" section", path)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var table []string
	for line := range strings.Lines(section) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "|") {
			table = append(table, line)
		} else if len(table) > 0 {
			break
		}
	}
	if len(table) < 3 || !regexp.MustCompile(`^\|[-:| ]+\|$`).MatchString(table[1]) {
		t.Fatalf("no table with a header and rows under \"## Signals\" in %s", path)
	}
	return table[2:]
}

// The README's table says what Decide does, row for row.
func TestREADMESignalsTable(t *testing.T) {
	rows := signalsTable(t, "../README.md")
	named := regexp.MustCompile(`SIG[A-Z0-9]+`)
	for _, row := range rows {
		i := slices.IndexFunc(readmeRows, func(r readmeClaim) bool { return r.row == row })
		if i < 0 {
			t.Errorf("README.md row unknown to this test (add what it claims to readmeRows):\n%s", row)
			continue
		}
		claim := readmeRows[i]
		// The claim is about the signals the row names, no more, no fewer.
		first := strings.Split(strings.Trim(row, "|"), "|")[0]
		var sigs []syscall.Signal
		for _, n := range named.FindAllString(first, -1) {
			sigs = append(sigs, unix.SignalNum(n))
		}
		if !slices.Equal(sigs, claim.sigs) {
			t.Errorf("row names %v, its claim is about %v:\n%s", sigs, claim.sigs, row)
		}
		for _, p := range claim.phases {
			for _, s := range claim.sigs {
				if got := Decide(p, s); got != claim.want {
					t.Errorf("README.md says %s in phase %v means %v; Decide says %v:\n%s", Name(s), p, claim.want, got, row)
				}
			}
		}
	}
	for _, r := range readmeRows {
		if !slices.Contains(rows, r.row) {
			t.Errorf("README.md lacks the row (changed or removed; update readmeRows):\n%s", r.row)
		}
	}
}
