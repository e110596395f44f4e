package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// readmeCronFlags returns the options of the README's crontab line, as
// the shell cron hands it to expands them, without --endpoints (the test's
// etcd stands in for it).
func readmeCronFlags(t *testing.T) []string {
	t.Helper()
	command := readmeCronCommand(t, "ENDPOINTS", []string{"JOB"})
	words, ok := strings.CutPrefix(command, "etcdlead run ")
	if !ok {
		t.Fatalf("README.md's cron line is not `etcdlead run ...`: %q", command)
	}
	out, err := exec.Command("/bin/sh", "-c", `args() { printf '%s\n' "$@"; }; args `+words).Output()
	if err != nil {
		t.Fatalf("README.md's cron line: the shell refused its words: %v", err)
	}
	var flags []string
	for _, f := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if f == "--" {
			return flags
		}
		if !strings.HasPrefix(f, "--endpoints=") {
			flags = append(flags, f)
		}
	}
	t.Fatalf("README.md's cron line has no -- before the job: %q", command)
	return nil
}

// The README's cron line, fired on two machines: the job runs once, and the
// machine that loses exits 0 without writing a thing, so cron has nothing
// to mail.
func TestReadmeCronLineLoserIsQuiet(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	flags := readmeCronFlags(t)
	m1 := e.start("m1", flags, e.probe())
	m1.out.waitFor(t, "m1", "ready", 0)
	m2 := e.start("m2", flags, e.probe("-exit", "0"))
	if got := m2.exit(t); got != 0 {
		t.Errorf("the losing machine exited %d, want 0", got)
	}
	if s := allOf(t, m2.log); s != "" {
		t.Errorf("the losing machine wrote to stderr:\n%s", s)
	}
	if s := allOf(t, m2.out); s != "" {
		t.Errorf("the losing machine wrote to stdout:\n%s", s)
	}
	m1.stop(t)
	m1.exit(t)
	if runs := e.jobRuns(t); runs != 1 {
		t.Fatalf("the job ran %d times, want once", runs)
	}
}

// allOf waits for the end of a stream and returns all it said.
func allOf(t *testing.T, l *lines) string {
	t.Helper()
	timeout := time.After(safety)
	for {
		all, closed, changed := l.snapshot()
		if closed {
			return strings.Join(all, "\n")
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("the stream did not end within %s", safety)
		}
	}
}

// readmeCronCommand returns the command of the README's crontab line, what
// cron hands to /bin/sh -c, with two words put in for the test's world: the
// endpoints (the test's etcd) and the job (the probe). Every other word is
// the README's own.
func readmeCronCommand(t *testing.T, endpoints string, job []string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n```cron\n")
	line, _, ok2 := strings.Cut(after, "\n")
	if !ok || !ok2 {
		t.Fatal("README.md has no cron block")
	}
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[5] != "etcdlead" {
		t.Fatalf("README.md's cron line is not `... etcdlead ...`: %q", line)
	}
	words := slices.Clone(fields[5:])
	endpointsAt, jobAt := -1, -1
	for i, w := range words {
		switch {
		case strings.HasPrefix(w, "--endpoints="):
			endpointsAt = i
		case w == "--" && jobAt < 0:
			jobAt = i + 1
		}
	}
	if endpointsAt < 0 || jobAt < 0 || jobAt != len(words)-1 {
		t.Fatalf("README.md's cron line is not `etcdlead run --endpoints=... OPTIONS -- JOB`: %q", line)
	}
	words[endpointsAt] = "--endpoints=" + endpoints
	// cron ends the command at an unescaped '%' and hands '\%' on as '%'.
	command := strings.Join(append(words[:jobAt], job...), " ")
	if strings.Contains(strings.ReplaceAll(command, `\%`, ""), "%") {
		t.Fatalf("README.md's cron line has a %% that cron would take for a newline: %q", line)
	}
	return strings.ReplaceAll(command, `\%`, "%")
}

// cronFiring runs command as cron does, through /bin/sh -c, with the test's
// binaries on PATH, before them the directories in first, and the test's
// key prefix in the environment.
func (e *env) cronFiring(name, command string, first ...string) *candidate {
	e.t.Helper()
	cmd := exec.Command("/bin/sh", "-c", command)
	path := strings.Join(append(first, binDir, os.Getenv("PATH")), ":")
	cmd.Env = append(os.Environ(), "PATH="+path, "ETCDLEAD_PREFIX="+e.prefix)
	// Its own process group, so that the shell's etcdlead goes with it
	// should the test end early.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := e.launch(name, cmd)
	e.t.Cleanup(func() { _ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) })
	return c
}

// The README's cron line as written, fired from three shells at once, as
// three machines' cron would: the job runs once, every machine exits as
// cron wants to see it, and only a failure writes anything to stderr (what
// cron mails): the winner's own story when the job fails, one line naming
// the cause when etcd is out of reach. The cases run in parallel with the
// rest of the package.
func TestReadmeCronLineThreeMachines(t *testing.T) {
	skipIfShort(t)
	for _, tc := range []struct {
		name        string
		jobExit     int    // the job's exit code
		unreachable bool   // the endpoints are a port nobody listens on
		winnerExit  int    // -1: no winner
		winnerSays  string // in the winner's stderr; "" means nothing at all
		losersExit  int
		losersSay   string // "" means nothing at all
	}{
		{name: "success", jobExit: 0, winnerExit: 0},
		{name: "job fails", jobExit: 3, winnerExit: 3, winnerSays: "child exited: status=3"},
		{name: "etcd unreachable", unreachable: true, winnerExit: -1, losersExit: 125, losersSay: "not reached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var endpoints []string
			if tc.unreachable {
				endpoints = []string{closedPort(t)}
			} else {
				endpoints = etcdtest.Start(t, etcdtest.Options{}).Endpoints()
			}
			e := newEnv(t, endpoints)
			command := readmeCronCommand(t, strings.Join(endpoints, ","), e.probe("-exit", strconv.Itoa(tc.jobExit)))
			var machines []*candidate
			for _, name := range []string{"m1", "m2", "m3"} {
				machines = append(machines, e.cronFiring(name, command))
			}
			// The winner ends once the line's --hold-at-least has passed.
			deadline := time.After(readmeCronHold(t) + safety)
			winners := 0
			for _, m := range machines {
				var code int
				select {
				case <-m.done:
					code = m.code
				case <-deadline:
					t.Fatalf("%s still runs after the line's --hold-at-least and %s more", m.name, safety)
				}
				stdout, stderr := allOf(t, m.out), allOf(t, m.log)
				if strings.HasPrefix(stdout, "ready") {
					winners++
					if code != tc.winnerExit {
						t.Errorf("%s ran the job and exited %d, want %d", m.name, code, tc.winnerExit)
					}
					checkSaid(t, m.name+" (the winner)", stderr, tc.winnerSays)
					continue
				}
				if code != tc.losersExit {
					t.Errorf("%s did not run the job and exited %d, want %d", m.name, code, tc.losersExit)
				}
				if stdout != "" {
					t.Errorf("%s did not run the job but wrote to stdout:\n%s", m.name, stdout)
				}
				checkSaid(t, m.name+" (a loser)", stderr, tc.losersSay)
			}
			wantRuns := 1
			if tc.winnerExit < 0 {
				wantRuns = 0
			}
			if winners != wantRuns {
				t.Errorf("%d machines ran the job, want %d", winners, wantRuns)
			}
			if runs := e.jobRuns(t); runs != wantRuns {
				t.Errorf("the job ran %d times, want %d", runs, wantRuns)
			}
		})
	}
}

// The README's cron line fired on a machine whose cron started the job
// after the winner's run had ended, in the same minute by its clock (a
// `date` that always answers that minute stands for it): the firing is
// recorded, so the late machine exits 0 without running the job and
// without writing a thing.
func TestReadmeCronLineLateMachineDoesNotRunAgain(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	clock := t.TempDir()
	date := "#!/bin/sh\necho 20261205T1000\n"
	if err := os.WriteFile(filepath.Join(clock, "date"), []byte(date), 0o755); err != nil {
		t.Fatal(err)
	}
	command := readmeCronCommand(t, strings.Join(cluster.Endpoints(), ","), e.probe("-exit", "0"))
	first := e.cronFiring("m1", command, clock)
	if code := first.exit(t); code != 0 || !strings.HasPrefix(allOf(t, first.out), "ready") {
		t.Fatalf("the first machine exited %d without running the job", code)
	}
	late := e.cronFiring("m2", command, clock)
	if code := late.exit(t); code != 0 {
		t.Errorf("the late machine exited %d, want 0", code)
	}
	checkSaid(t, "the late machine", allOf(t, late.log), "")
	if out := allOf(t, late.out); out != "" {
		t.Errorf("the late machine wrote to stdout:\n%s", out)
	}
	if runs := e.jobRuns(t); runs != 1 {
		t.Errorf("the job ran %d times, want once", runs)
	}
}

// readmeCronHold is the --hold-at-least of the README's cron line.
func readmeCronHold(t *testing.T) time.Duration {
	t.Helper()
	for _, f := range readmeCronFlags(t) {
		if v, ok := strings.CutPrefix(f, "--hold-at-least="); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("README.md's cron line: %s: %v", f, err)
			}
			return d
		}
	}
	return 0
}

// checkSaid holds what a machine wrote to stderr to what cron should mail:
// nothing when want is "", else text that holds want.
func checkSaid(t *testing.T, who, stderr, want string) {
	t.Helper()
	switch {
	case want == "" && stderr != "":
		t.Errorf("%s wrote to stderr, which cron would mail:\n%s", who, stderr)
	case want != "" && !strings.Contains(stderr, want):
		t.Errorf("%s's stderr does not say %q:\n%s", who, want, stderr)
	}
}

// closedPort is a loopback address that refuses connections: a port that
// was just listened on and closed.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
