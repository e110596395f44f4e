package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// moduleRoot is the etcdlead module's directory, found the way the go
// command finds it, so the demo works from any directory inside the module.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the etcdlead module: run `go run ./scripts/demo` from the repository")
	}
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(string(data), "module github.com/etcdlead/etcdlead\n") {
		return "", fmt.Errorf("%s is not etcdlead's go.mod: run the demo from the etcdlead repository", gomod)
	}
	return filepath.Dir(gomod), nil
}

// buildEtcdlead builds the root package and the keeper into dir, so the
// binaries under test are the ones users install (etcdlead finds its keeper
// beside it; the tag as in README.md, "Install"), without the etcd server
// that this demo embeds.
func buildEtcdlead(ctx context.Context, con *console, root, dir string) (string, error) {
	bin := filepath.Join(dir, "etcdlead")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "urfave_cli_no_docs", "-o", dir+string(filepath.Separator), ".", "./cmd/etcdlead-keeper")
	cmd.Dir = root
	// An interrupt lets go build stop its compilers; a kill would orphan them.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		con.writer("go build").Write(out)
		return "", fmt.Errorf("go build of etcdlead failed: %v", err)
	}
	return bin, nil
}

// candidate is one `etcdlead run` process. Its stdout and stderr share one
// pipe so that its log lines and its worker's lines keep their order.
type candidate struct {
	id      string
	cmd     *exec.Cmd
	told    atomic.Bool   // the demo stopped or killed it on purpose
	exited  chan struct{} // etcdlead itself has exited; err is set
	drained chan struct{} // every writer of its output (keeper, worker) is gone too
	err     error
}

func startCandidate(con *console, ev *events, bin, endpoint, id string) (*candidate, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", "--endpoints="+endpoint, "--election=demo", "--ttl=2s", "--id="+id,
		"--", self, "worker")
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own group: a Ctrl-C reaches the demo alone, which then stops
		// the candidates one by one as an operator would.
		Setpgid: true,
		// Should the demo die without cleaning up, the candidates stop too.
		Pdeathsig: syscall.SIGTERM,
	}
	err = cmd.Start()
	w.Close() // the pipe must end when the candidate's side closes it
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start %s: %v", id, err)
	}
	c := &candidate{id: id, cmd: cmd, exited: make(chan struct{}), drained: make(chan struct{})}
	go func() {
		defer close(c.drained)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			show(con, ev, c, sc.Text())
		}
	}()
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
		ev.add(event{c: c, kind: exited, at: time.Now()})
	}()
	return c, nil
}

// cleanEnv drops the caller's ETCDLEAD_* and ETCDCTL_* settings, which
// etcdlead would read as flags and which could steer the demo elsewhere.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCDLEAD_") && !strings.HasPrefix(kv, "ETCDCTL_") {
			env = append(env, kv)
		}
	}
	return env
}

func (c *candidate) pid() int { return c.cmd.Process.Pid }

func (c *candidate) terminate() {
	c.told.Store(true)
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
}

func (c *candidate) kill() {
	c.told.Store(true)
	_ = c.cmd.Process.Kill()
}

// wait returns once etcdlead and everything it started are gone: the pipe's
// end proves that its keeper and worker exited as well.
func (c *candidate) wait(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for _, ch := range []chan struct{}{c.exited, c.drained} {
		select {
		case <-ch:
		case <-t.C:
			return fmt.Errorf("%s (pid %d) did not stop within %v", c.id, c.pid(), timeout)
		}
	}
	return nil
}

// stopAll stops every candidate still running with SIGTERM and waits for
// them; only one that ignores it is killed.
func stopAll(cs []*candidate) error {
	for _, c := range cs {
		select {
		case <-c.exited:
		default:
			c.terminate()
		}
	}
	var errs []error
	for _, c := range cs {
		if err := c.wait(10 * time.Second); err != nil {
			c.kill()
			errs = append(errs, err, c.wait(5*time.Second))
		}
	}
	return errors.Join(errs...)
}
