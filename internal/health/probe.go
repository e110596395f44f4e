package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/supervisor"
)

// MaxOutput bounds what is kept of a check's output, as Docker keeps.
const MaxOutput = 4096

// Result is one check's answer.
type Result struct {
	OK     bool
	Code   int    // the command's exit code or the HTTP status; -1 when there was none
	Output string // the first MaxOutput bytes of its output or body
	// Err says what kept the check from answering (a timeout, a command
	// that cannot run, a refused connection); "" when it answered.
	Err string
	// TimedOut: the timeout killed it (Err says so too), which a caller
	// that counts outcomes tells apart from a failure.
	TimedOut bool
	At       time.Time // when it started
	Took     time.Duration
}

// Summary is one line about r for logs and status.
func (r Result) Summary() string {
	switch {
	case r.Err != "":
		return r.Err
	case r.OK:
		return fmt.Sprintf("passed (%d)", r.Code)
	}
	return fmt.Sprintf("failed (%d)", r.Code)
}

// Probe is one kind of check.
type Probe interface {
	// Check runs the check once, bounded by its timeout. deadline, if
	// not nil, gives the boot-clock fence deadline of the processes it
	// starts: a term's, which its renewals move on while the check runs.
	// When it returns, no process it started is left; ctx ending stops it
	// early.
	Check(ctx context.Context, deadline func() time.Duration) Result
}

// Command is a check by a shell command: `/bin/sh -c Shell`, healthy when
// it exits 0.
type Command struct {
	Shell string
	// Args follow Shell on sh's command line: its $0, $1 and on (--notify
	// passes the role as $1); none for a check.
	Args    []string
	Timeout time.Duration
	Env     []string // the command's whole environment
	// KillTimeout and FenceMargin are the keeper's, as for the child.
	KillTimeout, FenceMargin time.Duration
	Log                      hclog.Logger
}

// deadlinePoll is how often a running check command's fence follows its
// term's deadline. A fence that lags only fires earlier.
const deadlinePoll = 250 * time.Millisecond

func (c *Command) Check(ctx context.Context, deadline func() time.Duration) (res Result) {
	res = Result{Code: -1, At: time.Now()}
	defer func() { res.Took = time.Since(res.At) }()
	var fence time.Duration
	if deadline != nil {
		fence = deadline()
	}
	child, r, err := c.start(fence)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer r.Close()
	out := make(chan string, 1)
	go func() { out <- readCapped(r) }()
	res.Err, res.TimedOut = c.await(ctx, child, deadline, fence)
	// Every process of the check is gone, so the pipe ends once the
	// keeper, which writes to it too, has exited: soon.
	_ = r.SetReadDeadline(time.Now().Add(time.Second))
	res.Output = <-out
	if res.Err != "" {
		return res
	}
	x := child.Result()
	res.Code = x.Code
	switch x.Reason {
	case supervisor.ReasonExited:
		res.OK = x.Code == 0
	case supervisor.ReasonFenced:
		res.Err = "stopped at the term's fence"
	default:
		res.Err = fmt.Sprintf("ended: %s", x.Reason)
	}
	return res
}

// start starts the command under a keeper of its own, fenced at fence,
// with its stdout and stderr on the returned pipe.
func (c *Command) start(fence time.Duration) (*supervisor.Child, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		r.Close()
		w.Close()
		return nil, nil, err
	}
	// Stdin is not the terminal: a check never takes its foreground.
	child, err := supervisor.Start(supervisor.Spec{
		Path: "/bin/sh", Argv: append([]string{"sh", "-c", c.Shell}, c.Args...), Env: c.Env,
		KillSignal: syscall.SIGTERM, KillTimeout: c.KillTimeout, FenceMargin: c.FenceMargin, Deadline: fence,
		LogLevel: "error", Stdin: devnull, Stdout: w, Stderr: w,
	}, c.Log)
	w.Close()
	devnull.Close()
	if err != nil {
		r.Close()
		return nil, nil, fmt.Errorf("not started: %w", err)
	}
	return child, r, nil
}

// await waits for the command's end, moving its fence with the term's
// deadline, and kills its whole tree at the timeout or once ctx ends. It
// returns why the check failed before the command ended, "" otherwise.
func (c *Command) await(ctx context.Context, child *supervisor.Child, deadline func() time.Duration, fence time.Duration) (failed string, timedOut bool) {
	timeout := time.NewTimer(c.Timeout)
	defer timeout.Stop()
	var follow <-chan time.Time
	if deadline != nil {
		t := time.NewTicker(deadlinePoll)
		defer t.Stop()
		follow = t.C
	}
	for {
		select {
		case <-child.Done():
			return "", false
		case <-follow:
			// The term was renewed: its fence moves on, for the check's
			// processes as for the command's.
			if d := deadline(); d != fence {
				fence = d
				child.SetDeadline(d)
			}
		case <-timeout.C:
			child.Kill()
			<-child.Done()
			return fmt.Sprintf("timed out after %s", c.Timeout), true
		case <-ctx.Done():
			child.Kill()
			<-child.Done()
			return "stopped", false
		}
	}
}

// readCapped reads r to its end and returns the first MaxOutput bytes: a
// check that floods its output is drained, never blocked on a full pipe.
func readCapped(r io.Reader) string {
	buf := make([]byte, 0, MaxOutput)
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if room := MaxOutput - len(buf); room > 0 {
			buf = append(buf, chunk[:min(n, room)]...)
		}
		if err != nil {
			return string(buf)
		}
	}
}

// HTTP is a check by an HTTP GET: healthy on a 2xx answer.
type HTTP struct {
	URL     string
	Timeout time.Duration
	Client  *http.Client // nil: a client that follows no proxy and keeps no connection
}

var plainClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

func (h *HTTP) Check(ctx context.Context, _ func() time.Duration) (res Result) {
	res = Result{Code: -1, At: time.Now()}
	defer func() { res.Took = time.Since(res.At) }()
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL, nil)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	req.Header.Set("User-Agent", "etcdlead-health")
	client := h.Client
	if client == nil {
		client = plainClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.Err = fmt.Sprintf("timed out after %s", h.Timeout)
			res.TimedOut = true
		} else {
			res.Err = err.Error()
		}
		return res
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxOutput))
	res.Code, res.Output = resp.StatusCode, string(b)
	res.OK = resp.StatusCode >= 200 && resp.StatusCode < 300
	return res
}
