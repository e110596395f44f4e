package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlead/etcdlead/internal/testsupport/faultproxy"
)

// cluster is a three-member etcd on loopback, its data on disk as the
// single member's, for the figures where a member's fault is the subject
// (failovers.go, tolerance.go). Every candidate reaches the members through
// a proxy of its own per member (faultproxy), so that a slow link can be
// put on all of them at once.
type cluster struct {
	members []*etcdProc
	proxies []*faultproxy.Proxy
	ids     []uint64 // member ids, by index
}

// startCluster starts three members and a proxy in front of each.
func (b *bench) startCluster(ctx context.Context, name string) (*cluster, error) {
	const n = 3
	var cports, pports []int
	for range 2 * n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if len(cports) < n {
			cports = append(cports, p)
		} else {
			pports = append(pports, p)
		}
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, pports[i]))
	}
	c := &cluster{}
	for i := range n {
		p := &etcdProc{
			endpoint: fmt.Sprintf("127.0.0.1:%d", cports[i]),
			dataDir:  filepath.Join(b.dir, fmt.Sprintf("%s-m%d", name, i)),
			log:      filepath.Join(b.dir, "logs", fmt.Sprintf("%s-m%d.log", name, i)),
			done:     make(chan struct{}),
		}
		logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			c.stop()
			return nil, err
		}
		peer := fmt.Sprintf("http://127.0.0.1:%d", pports[i])
		p.cmd = exec.Command(b.bins.etcd,
			"--name", fmt.Sprintf("m%d", i),
			"--data-dir", p.dataDir,
			"--listen-client-urls", "http://"+p.endpoint,
			"--advertise-client-urls", "http://"+p.endpoint,
			"--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--log-level", "error")
		p.cmd.Env = b.env
		p.cmd.Stdout, p.cmd.Stderr = logf, logf
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err = p.cmd.Start()
		logf.Close()
		if err != nil {
			c.stop()
			return nil, err
		}
		go func() {
			_ = p.cmd.Wait()
			close(p.done)
		}()
		c.members = append(c.members, p)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.stop()
		return nil, err
	}
	defer cli.Close()
	deadline := time.Now().Add(60 * time.Second)
	for i, m := range c.members {
		for {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := cli.Status(rctx, m.endpoint)
			cancel()
			if err == nil && st.Leader != 0 {
				c.ids = append(c.ids, st.Header.MemberId)
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				c.stop()
				return nil, fmt.Errorf("cluster member %d not serving after 60s: %v", i, err)
			}
			time.Sleep(50 * time.Millisecond) // polling a process that gives no event
		}
	}
	for _, m := range c.members {
		px, err := faultproxy.New(m.endpoint)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.proxies = append(c.proxies, px)
	}
	return c, nil
}

func (c *cluster) endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.endpoint)
	}
	return out
}

// proxied are the members' addresses through their proxies.
func (c *cluster) proxied() []string {
	var out []string
	for _, p := range c.proxies {
		out = append(out, p.Addr())
	}
	return out
}

// client is a client of every member, through the proxies.
func (c *cluster) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: c.proxied(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// raftLeader is the index of the member that is the raft leader, asked of
// the members directly.
func (c *cluster) raftLeader(ctx context.Context) (int, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, m := range c.members {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := cli.Status(rctx, m.endpoint)
			cancel()
			if err != nil || st.Leader == 0 {
				continue
			}
			for i, id := range c.ids {
				if id == st.Leader {
					return i, nil
				}
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, errors.New("no raft leader within 30s")
		}
		time.Sleep(100 * time.Millisecond) // polling a process that gives no event
	}
}

// moveLeader hands the raft leadership to the next member and waits until
// it has it: a new raft term, as after an election etcd made itself.
func (c *cluster) moveLeader(ctx context.Context) error {
	from, err := c.raftLeader(ctx)
	if err != nil {
		return err
	}
	to := (from + 1) % len(c.members)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.members[from].endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cli.MoveLeader(mctx, c.ids[to]); err != nil {
		return fmt.Errorf("move the raft leadership: %w", err)
	}
	for {
		now, err := c.raftLeader(ctx)
		if err != nil || now == to {
			return err
		}
		time.Sleep(100 * time.Millisecond) // polling a process that gives no event
	}
}

// freeze stops member i (SIGSTOP): its connections stay open and silent.
func (c *cluster) freeze(i int) { _ = c.members[i].cmd.Process.Signal(syscall.SIGSTOP) }

// thaw resumes member i.
func (c *cluster) thaw(i int) { _ = c.members[i].cmd.Process.Signal(syscall.SIGCONT) }

// delay puts a one-way delay of d on every proxy (0 ends it).
func (c *cluster) delay(d time.Duration) {
	for _, p := range c.proxies {
		p.Delay(d)
	}
}

func (c *cluster) stop() {
	for _, p := range c.proxies {
		_ = p.Close()
	}
	for i, m := range c.members {
		c.thaw(i)
		m.stop()
	}
}
