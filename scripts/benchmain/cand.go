package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// tool is one of the two programs under test, as a command line.
type tool struct {
	Key  string // "etcdlead" or "etcdctl": group names, file names
	Name string // as printed
	bin  string
	args func(endpoint, election string, ttl int, id string, child []string) []string
	// Prefix is where the tool's candidates keep their keys for election.
	Prefix func(election string) string
}

func etcdleadTool(bin string) *tool {
	return &tool{
		Key: "etcdlead", Name: "etcdlead", bin: bin,
		args: func(ep, election string, ttl int, id string, child []string) []string {
			return append([]string{"run", "--endpoints=" + ep, "--election=" + election,
				"--ttl=" + strconv.Itoa(ttl) + "s", "--id=" + id, "--"}, child...)
		},
		Prefix: func(election string) string { return "etcdlead/" + election + "/" },
	}
}

func etcdctlTool(bin string) *tool {
	return &tool{
		Key: "etcdctl", Name: "etcdctl lock", bin: bin,
		args: func(ep, election string, ttl int, _ string, child []string) []string {
			return append([]string{"--endpoints=" + ep, "lock", "--ttl=" + strconv.Itoa(ttl), election}, child...)
		},
		Prefix: func(election string) string { return election + "/" },
	}
}

// Command line shown in the report, with placeholders.
func (t *tool) commandLine(ttl int) string {
	return t.Key + " " + joinArgs(t.args("127.0.0.1:PORT", "NAME", ttl, "ID", []string{"child", "SOCKET", "ID"}))
}

func joinArgs(a []string) string {
	s := ""
	for i, x := range a {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s
}

// cand is one supervisor process: an etcdlead run or an etcdctl lock.
type cand struct {
	ID   string
	Tool *tool
	cmd  *exec.Cmd
	done chan struct{}
}

func (c *cand) Pid() int { return c.cmd.Process.Pid }

// Kill is kill -9 of this process alone, as a crash would be.
func (c *cand) Kill() { _ = c.cmd.Process.Signal(syscall.SIGKILL) }

func (c *cand) Signal(s syscall.Signal) { _ = c.cmd.Process.Signal(s) }

func (c *cand) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process to end.
func (c *cand) Wait(timeout time.Duration) error {
	select {
	case <-c.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s %s still running after %v", c.Tool.Key, c.ID, timeout)
	}
}

// procs owns every process the bench starts, so that any exit path can stop
// them all.
type procs struct {
	mu    sync.Mutex
	cands []*cand
}

func (p *procs) add(c *cand) {
	p.mu.Lock()
	p.cands = append(p.cands, c)
	p.mu.Unlock()
}

// killAll SIGKILLs every candidate still running and waits for it. The
// keepers of killed etcdlead supervisors then stop their children; children
// of etcdctl lock, orphaned, exit when the bench's socket closes.
func (p *procs) killAll() {
	p.mu.Lock()
	cs := append([]*cand(nil), p.cands...)
	p.cands = nil
	p.mu.Unlock()
	for _, c := range cs {
		if !c.Exited() {
			c.Kill()
		}
	}
	for _, c := range cs {
		_ = c.Wait(10 * time.Second)
	}
}

// spawnOpts are what a candidate of a traced pass gets beyond the usual:
// variables in its environment, and an etcd endpoint of its own (a
// timestamping proxy).
type spawnOpts struct {
	env      []string
	endpoint string
	bin      string // instead of the tool's own binary
	cgroup   int    // a descriptor of the cgroup to start in (cpuGroups); 0, stdin's: the bench's own
}

// spawn starts one candidate of t for election; its child reports to the hub
// with id.
func (b *bench) spawn(t *tool, election string, ttl int, id string) (*cand, error) {
	return b.spawnWith(t, election, ttl, id, spawnOpts{})
}

func (b *bench) spawnWith(t *tool, election string, ttl int, id string, o spawnOpts) (*cand, error) {
	child := []string{b.bins.child, b.hub.Path, id}
	ep := b.endpoint
	if o.endpoint != "" {
		ep = o.endpoint
	}
	bin := t.bin
	if o.bin != "" {
		bin = o.bin
	}
	cmd := exec.Command(bin, t.args(ep, election, ttl, id, child)...)
	cmd.Env = append(append([]string(nil), b.env...), o.env...)
	logf, err := os.OpenFile(filepath.Join(b.dir, "logs", t.Key+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// A group of its own, like a service manager would give it; and
		// the kernel kills it should the bench die without cleaning up.
		Setpgid:     true,
		Pdeathsig:   syscall.SIGKILL,
		UseCgroupFD: o.cgroup > 0,
		CgroupFD:    o.cgroup,
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &cand{ID: id, Tool: t, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	b.procs.add(c)
	return c, nil
}

// count is how many keys the election's queue holds.
func (b *bench) count(ctx context.Context, prefix string) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := b.cli.Get(rctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// waitCount polls until the queue under prefix holds n keys.
func (b *bench) waitCount(ctx context.Context, prefix string, n int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		got, err := b.count(ctx, prefix)
		if err == nil && got == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("queue %s holds %d keys, want %d, after %v (last error %v)", prefix, got, n, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10*time.Millisecond + time.Duration(n)*10*time.Microsecond):
			// A count walks etcd's index of every key under the
			// prefix: a large fleet is counted less often, or the
			// counting would load the etcd it measures.
		}
	}
}
