package etcdtest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// readyTimeout is a safety net, not a pace: waits end as soon as
	// etcd answers. It is generous because a 2-core CI machine running
	// several race-instrumented test binaries can be very slow.
	readyTimeout   = 60 * time.Second
	stopTimeout    = 30 * time.Second
	requestTimeout = 2 * time.Second
	pollInterval   = 50 * time.Millisecond
	startAttempts  = 3
	logTailBytes   = 4 << 10
)

// Options configures Start. The zero value is a one-member cluster.
type Options struct {
	// Members is the number of members; 0 means 1. Use an odd number.
	Members int
	// DataDir is the directory under which each member gets a data
	// directory and a log file; it defaults to a t.TempDir. The members'
	// entries in it must not exist yet, and are removed at cleanup.
	DataDir string
	// ExtraArgs are appended to every member's command line, after the
	// defaults, so they can override them (for example
	// "--unsafe-no-fsync=false" or "--election-timeout=500").
	ExtraArgs []string
}

// Cluster is a set of etcd members started together by Start.
type Cluster struct {
	mu      sync.Mutex
	members []*Member
}

// Start starts a new cluster and returns once every member has served a
// linearizable Get. The test's cleanup kills the members and removes their
// data. If a member exits during start-up (typically because another process
// took one of the chosen ports), Start tries again with new ports.
//
// Members run with --unsafe-no-fsync: it makes them much faster on slow
// disks and loses nothing when only processes, not the machine, die.
func Start(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	n := max(opts.Members, 1)
	bin := EtcdBinary(tb)
	base := opts.DataDir
	if base == "" {
		base = tb.TempDir()
	}
	c := &Cluster{}
	// Registered before any process exists so that a Fatal below still
	// leaves nothing running.
	tb.Cleanup(c.destroy)
	c.startWithRetries(tb, fmt.Sprintf("a %d-member cluster", n), func() error {
		return c.tryStart(bin, base, n, opts.ExtraArgs)
	})
	return c
}

// startWithRetries runs try until it succeeds; a try that failed because
// etcd exited (another process took a chosen port) is retried on new ports,
// up to startAttempts. The logs of a failed try are kept in the test's log.
func (c *Cluster) startWithRetries(tb testing.TB, what string, try func() error) {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		err := try()
		if err == nil {
			return
		}
		for _, m := range c.Members() {
			tb.Logf("etcdtest: log of %s:\n%s", m.name, logTail(m.logPath, logTailBytes))
		}
		c.destroy()
		if !errors.Is(err, errExited) || attempt == startAttempts {
			tb.Fatalf("etcdtest: start of %s failed (attempt %d): %v", what, attempt, err)
		}
		tb.Logf("etcdtest: start attempt %d failed: %v; retrying on new ports", attempt, err)
	}
}

func (c *Cluster) tryStart(bin, base string, n int, extraArgs []string) error {
	ports, err := freePorts(2 * n)
	if err != nil {
		return err
	}
	token := make([]byte, 8)
	_, _ = rand.Read(token)

	members := make([]*Member, n)
	peerURLs := make([]string, n)
	var initialCluster []string
	for i := range members {
		name := fmt.Sprintf("member-%d", i)
		members[i] = &Member{
			name:       name,
			clientAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
			dataDir:    filepath.Join(base, name),
			logPath:    filepath.Join(base, name+".log"),
			bin:        bin,
		}
		peerURLs[i] = fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		initialCluster = append(initialCluster, name+"="+peerURLs[i])
		// A leftover data directory would make etcd ignore the
		// --initial-cluster flags and rejoin some older cluster. This is
		// checked before the cluster owns the member, whose cleanup
		// would remove the directory.
		if _, err := os.Stat(members[i].dataDir); err == nil {
			return fmt.Errorf("data directory %s already exists", members[i].dataDir)
		}
	}
	c.mu.Lock()
	c.members = members
	c.mu.Unlock()

	for i, m := range members {
		clientURL := "http://" + m.clientAddr
		m.args = append([]string{
			"--name", m.name,
			"--data-dir", m.dataDir,
			"--listen-client-urls", clientURL,
			"--advertise-client-urls", clientURL,
			"--listen-peer-urls", peerURLs[i],
			"--initial-advertise-peer-urls", peerURLs[i],
			"--initial-cluster", strings.Join(initialCluster, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", "etcdtest-" + hex.EncodeToString(token),
			"--log-level", "error",
			"--unsafe-no-fsync",
		}, extraArgs...)
		if err := m.start(); err != nil {
			return err
		}
	}
	return waitServing(members)
}

// destroy kills every member and removes its data.
func (c *Cluster) destroy() {
	for _, m := range c.Members() {
		if p := m.running(); p != nil {
			p.kill()
		}
		_ = os.RemoveAll(m.dataDir)
		_ = os.Remove(m.logPath)
	}
	c.mu.Lock()
	c.members = nil
	c.mu.Unlock()
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// They are all held open together so the kernel cannot hand out one twice.
// freePorts picks ports below the kernel's ephemeral range (Linux default
// 32768-60999). A port from port 0 comes from that range, and once a member
// stops, any outgoing connection on the machine may take its port, so a
// restart on the same port would fail with "address already in use".
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n && tries < 1000; tries++ {
		port := 10000 + mrand.IntN(22000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		defer l.Close()
		ports = append(ports, port)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("no %d free ports in 10000-31999", n)
	}
	return ports, nil
}

// Members returns the cluster's members, in the order of Member's index.
func (c *Cluster) Members() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Member(nil), c.members...)
}

// Member returns the i-th member, counting from 0.
func (c *Cluster) Member(i int) *Member { return c.Members()[i] }

// Endpoints returns the client addresses ("127.0.0.1:PORT") of all members,
// running or not, in member order.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members() {
		eps = append(eps, m.clientAddr)
	}
	return eps
}

// RestartAll starts every member that is not running, all at once, and waits
// until every member serves. Unlike Member.Restart one at a time, this brings
// back a cluster that has lost its quorum.
func (c *Cluster) RestartAll(tb testing.TB) {
	tb.Helper()
	members := c.Members()
	for _, m := range members {
		if m.running() == nil {
			if err := m.start(); err != nil {
				tb.Fatalf("etcdtest: restart %s: %v", m.name, err)
			}
		}
	}
	if err := waitServing(members); err != nil {
		for _, m := range members {
			tb.Logf("etcdtest: log of %s:\n%s", m.name, logTail(m.logPath, logTailBytes))
		}
		tb.Fatalf("etcdtest: restart: %v", err)
	}
}
