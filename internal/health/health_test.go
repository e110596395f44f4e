package health_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/health"
	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
	"github.com/etcdlead/etcdlead/supervisor"
)

// The test binary doubles as the keeper, as etcdlead does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervisor.KeeperArg {
		os.Exit(supervisor.RunKeeper(os.Args[2:]))
	}
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// Docker HEALTHCHECK's rules: failures in the start period do not count
// until a check passed; Retries failures in a row that count make the
// status unhealthy; one pass makes it healthy.
func TestTracker(t *testing.T) {
	begin := time.Unix(1000, 0)
	at := func(s int) time.Time { return begin.Add(time.Duration(s) * time.Second) }
	pass := func(s int) health.Result { return health.Result{OK: true, At: at(s)} }
	fail := func(s int) health.Result { return health.Result{At: at(s)} }
	for _, c := range []struct {
		name    string
		retries int
		start   time.Duration
		results []health.Result
		want    []health.Status
	}{
		{"retries", 3, 0, []health.Result{fail(1), fail(2), fail(3), pass(4), fail(5)},
			[]health.Status{health.Starting, health.Starting, health.Unhealthy, health.Healthy, health.Healthy}},
		{"start period", 1, 10 * time.Second, []health.Result{fail(1), fail(9), fail(10)},
			[]health.Status{health.Starting, health.Starting, health.Unhealthy}},
		{"a pass ends the start period", 1, 10 * time.Second, []health.Result{pass(1), fail(2)},
			[]health.Status{health.Healthy, health.Unhealthy}},
		{"a pass resets the count", 2, 0, []health.Result{fail(1), pass(2), fail(3), fail(4)},
			[]health.Status{health.Starting, health.Healthy, health.Healthy, health.Unhealthy}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := health.NewTracker(c.retries, c.start, begin)
			for i, r := range c.results {
				if got := tr.Observe(r); got != c.want[i] {
					t.Fatalf("after result %d: %s, want %s", i, got, c.want[i])
				}
			}
		})
	}
}

func command(shell string, timeout time.Duration) *health.Command {
	return &health.Command{Shell: shell, Timeout: timeout, Env: os.Environ(),
		KillTimeout: 200 * time.Millisecond, FenceMargin: 100 * time.Millisecond, Log: hclog.NewNullLogger()}
}

// A check command's answer, and what hostile commands cost: one that
// hangs, floods its output, forks descendants that ignore SIGTERM, or is
// stopped by its caller returns by its timeout (or at once), and no
// process of it is left when Check returns.
func TestCommand(t *testing.T) {
	dir := t.TempDir()
	pidfile := func(name string) string { return filepath.Join(dir, name) }
	pid := func(t *testing.T, name string) int {
		t.Helper()
		b, err := os.ReadFile(pidfile(name))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	gone := func(t *testing.T, name string) {
		t.Helper()
		if p := pid(t, name); !proctest.Gone(p) {
			proctest.KillAtCleanup(t, p)
			t.Errorf("process %d of the check outlived Check", p)
		}
	}

	t.Run("pass", func(t *testing.T) {
		r := command("echo ok", 10*time.Second).Check(t.Context(), nil)
		if !r.OK || r.Code != 0 || r.Output != "ok\n" || r.Err != "" || r.Took <= 0 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("fail", func(t *testing.T) {
		r := command("echo bad >&2; exit 1", 10*time.Second).Check(t.Context(), nil)
		if r.OK || r.Code != 1 || r.Output != "bad\n" || r.Err != "" || r.TimedOut {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("not found", func(t *testing.T) {
		r := command("/nonexistent/check", 10*time.Second).Check(t.Context(), nil)
		if r.OK || r.Code != 127 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("hangs", func(t *testing.T) {
		r := command(fmt.Sprintf("sleep 600 & echo $! > %s; wait", pidfile("hang")), 300*time.Millisecond).Check(t.Context(), nil)
		if r.OK || !strings.Contains(r.Err, "timed out") || !r.TimedOut {
			t.Fatalf("%+v", r)
		}
		gone(t, "hang")
	})
	t.Run("floods", func(t *testing.T) {
		r := command("yes", 300*time.Millisecond).Check(t.Context(), nil)
		if r.OK || !strings.Contains(r.Err, "timed out") || len(r.Output) != health.MaxOutput {
			t.Fatalf("ok %v, err %q, %d bytes of output", r.OK, r.Err, len(r.Output))
		}
	})
	t.Run("forks", func(t *testing.T) {
		shell := fmt.Sprintf(`sh -c 'trap "" TERM; while :; do sleep 1; done' & echo $! > %s; echo fine`, pidfile("fork"))
		r := command(shell, 10*time.Second).Check(t.Context(), nil)
		if !r.OK || r.Output != "fine\n" {
			t.Fatalf("%+v", r)
		}
		gone(t, "fork")
	})
	t.Run("stopped", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan health.Result, 1)
		go func() {
			done <- command(fmt.Sprintf("echo $$ > %s; exec sleep 600", pidfile("stop")), time.Hour).Check(ctx, nil)
		}()
		for {
			// Its pid written, not only its file made: the shell's
			// redirection creates the file before echo writes to it.
			if b, err := os.ReadFile(pidfile("stop")); err == nil && strings.HasSuffix(string(b), "\n") {
				break
			}
			select {
			case r := <-done:
				t.Fatalf("the check ended before it started: %+v", r)
			case <-time.After(10 * time.Millisecond):
			}
		}
		cancel()
		r := <-done
		if r.OK || r.Err != "stopped" {
			t.Fatalf("%+v", r)
		}
		gone(t, "stop")
	})
}

// An HTTP check: 2xx is healthy, anything else not; a server that does
// not answer costs the timeout; a body is kept up to MaxOutput bytes.
func TestHTTP(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			fmt.Fprint(w, "fine")
		case "/sick":
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, strings.Repeat("x", 2*health.MaxOutput))
		case "/hang":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	check := func(path string) health.Result {
		return (&health.HTTP{URL: srv.URL + path, Timeout: 300 * time.Millisecond}).Check(t.Context(), nil)
	}
	if r := check("/ok"); !r.OK || r.Code != 200 || r.Output != "fine" {
		t.Errorf("/ok: %+v", r)
	}
	if r := check("/sick"); r.OK || r.Code != 503 || len(r.Output) != health.MaxOutput {
		t.Errorf("/sick: ok %v, code %d, %d bytes", r.OK, r.Code, len(r.Output))
	}
	if r := check("/hang"); r.OK || !strings.Contains(r.Err, "timed out") {
		t.Errorf("/hang: %+v", r)
	}
}

// What a check command costs beside a bare fork and exec of the same shell
// (the baseline, measured in the same run): the keeper's start and its
// containment, paid once per --health-interval.
func BenchmarkCommandCheck(b *testing.B) {
	b.Run("check", func(b *testing.B) {
		c := command("true", time.Minute)
		for b.Loop() {
			if r := c.Check(b.Context(), nil); !r.OK {
				b.Fatalf("%+v", r)
			}
		}
	})
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A check command's processes are fenced as the command's are: at the
// term's deadline, which its renewals move on while the check runs. A
// check that outlasts one TTL of a term that is renewed is not cut short;
// one whose term is not renewed is stopped at the fence.
func TestCommandFollowsTheTermsDeadline(t *testing.T) {
	const ahead = 800 * time.Millisecond // a deadline this far ahead: T − K − m leaves 500ms
	renewed := func() time.Duration { return bootclock.Now() + ahead }
	r := command("sleep 1.5", 10*time.Second).Check(t.Context(), renewed)
	if !r.OK {
		t.Errorf("a check of a renewed term: %+v, want it to pass", r)
	}
	fixed := bootclock.Now() + ahead
	r = command("sleep 5", 10*time.Second).Check(t.Context(), func() time.Duration { return fixed })
	if r.OK || !strings.Contains(r.Err, "fence") {
		t.Errorf("a check of a term not renewed: %+v, want it stopped at the fence", r)
	}
}
