package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
)

// Member is one etcd server process of a Cluster. Its methods may be called
// from any goroutine.
type Member struct {
	name       string
	clientAddr string
	dataDir    string
	logPath    string
	bin        string
	args       []string

	mu   sync.Mutex
	proc *process // nil before the first start
	id   uint64   // raft member ID, learnt from its first answer
}

// ClientAddr returns the member's client address, "127.0.0.1:PORT". It stays
// the same across Restart.
func (m *Member) ClientAddr() string { return m.clientAddr }

// MetricsURL returns the URL of the member's Prometheus metrics, which etcd
// serves on its client port.
func (m *Member) MetricsURL() string { return "http://" + m.clientAddr + "/metrics" }

// DataDir returns the member's data directory.
func (m *Member) DataDir() string { return m.dataDir }

// Kill ends the member with SIGKILL, as a crash would, and waits until the
// process is gone. It does nothing if the member is not running.
func (m *Member) Kill(tb testing.TB) {
	tb.Helper()
	if p := m.running(); p != nil {
		p.kill()
	}
}

// Stop asks the member to shut down with SIGTERM, as an operator would, and
// waits until the process is gone. It does nothing if the member is not
// running.
func (m *Member) Stop(tb testing.TB) {
	tb.Helper()
	p := m.running()
	if p == nil {
		return
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		p.kill()
		tb.Errorf("etcdtest: %s ignored SIGTERM for %v; killed it\n%s", m.name, stopTimeout, logTail(m.logPath, logTailBytes))
	}
}

// Restart stops the member if it is running, starts it again with the same
// ports and data directory, and waits until it serves a linearizable Get.
// That needs a quorum, so in a cluster where most members are down use
// Cluster.RestartAll instead of restarting them one by one.
func (m *Member) Restart(tb testing.TB) {
	tb.Helper()
	m.Stop(tb)
	if err := m.start(); err != nil {
		tb.Fatalf("etcdtest: restart %s: %v", m.name, err)
	}
	if err := waitServing([]*Member{m}); err != nil {
		tb.Logf("etcdtest: log of %s:\n%s", m.name, logTail(m.logPath, logTailBytes))
		tb.Fatalf("etcdtest: restart %s: %v", m.name, err)
	}
}

func (m *Member) start() error {
	p, err := startProcess(m.bin, m.args, m.logPath)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	return nil
}

// running returns the member's process if it has not exited.
func (m *Member) running() *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || m.proc.done() {
		return nil
	}
	return m.proc
}

func (m *Member) memberID() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.id
}

func (m *Member) setMemberID(id uint64) {
	m.mu.Lock()
	m.id = id
	m.mu.Unlock()
}

var errExited = errors.New("etcd exited")

// waitServing returns once every member in ms has served a linearizable Get,
// which proves that its gRPC server is up and that it is part of a cluster
// with an elected leader. It fails as soon as any of them exits, which is how
// a port taken by someone else shows up.
func waitServing(ms []*Member) error {
	ctx, cancel := context.WithDeadlineCause(context.Background(), time.Now().Add(readyTimeout),
		fmt.Errorf("not serving after %v", readyTimeout))
	defer cancel()
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	for _, m := range ms {
		p := m.running()
		if p == nil {
			return fmt.Errorf("%w: %s", errExited, m.name)
		}
		go func() {
			select {
			case <-p.exited:
				abort(fmt.Errorf("%w: %s", errExited, m.name))
			case <-ctx.Done():
			}
		}()
	}
	for _, m := range ms {
		if err := m.waitServing(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (m *Member) waitServing(ctx context.Context) error {
	cli, err := newClient(m.clientAddr)
	if err != nil {
		return err
	}
	defer cli.Close()
	// etcd offers no event for "ready" that reaches another process, so
	// this polls; the ticker only paces retries after a failed request.
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		reqCtx, cancel := context.WithTimeout(ctx, requestTimeout)
		resp, err := cli.Get(reqCtx, "etcdtest/ready")
		cancel()
		if err == nil {
			m.setMemberID(resp.Header.MemberId)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last request error: %v)", m.name, context.Cause(ctx), err)
		case <-tick.C:
		}
	}
}

// GRPCCount sums one of etcd's gRPC counters for a method over its label
// sets, from the member's /metrics: grpc_server_started_total counts
// streams opened and calls begun, grpc_server_handled_total calls answered.
func (m *Member) GRPCCount(tb testing.TB, metric, method string) int {
	tb.Helper()
	resp, err := http.Get(m.MetricsURL())
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, metric+"{") && strings.Contains(l, `grpc_method="`+method+`"`) {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				tb.Fatalf("metrics line %q: %v", l, err)
			}
			n += int(v)
		}
	}
	return n
}

// Freeze stops the member with SIGSTOP, as a frozen VM, a long GC pause or
// a stalled disk would: its connections stay open and carry nothing. The
// member is thawed when the test ends, if Thaw has not been called.
func (m *Member) Freeze(tb testing.TB) {
	tb.Helper()
	p := m.running()
	if p == nil {
		tb.Fatalf("etcdtest: freeze %s: not running", m.name)
	}
	p.signal(syscall.SIGSTOP)
	tb.Cleanup(func() { p.signal(syscall.SIGCONT) })
	// kill(2) returns before the stop has reached every thread: a request
	// sent at once could still be answered. The kernel tells nobody when it
	// has, so /proc is looked at until it says so.
	pid := p.cmd.Process.Pid
	for end := time.Now().Add(10 * time.Second); !proctest.Stopped(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			tb.Fatalf("etcdtest: freeze %s: pid %d not stopped after 10s", m.name, pid)
		}
	}
}

// Thaw resumes a frozen member with SIGCONT.
func (m *Member) Thaw(tb testing.TB) {
	tb.Helper()
	if p := m.running(); p != nil {
		p.signal(syscall.SIGCONT)
	}
}

// OpenStreams is how many streams of a gRPC method the member has open
// now: those it saw opened less those it saw end.
func (m *Member) OpenStreams(tb testing.TB, method string) int {
	tb.Helper()
	return m.GRPCCount(tb, "grpc_server_started_total", method) - m.GRPCCount(tb, "grpc_server_handled_total", method)
}

// Defrag defragments the member's backend with `etcdctl defrag`, as an
// operator would, aimed at this member alone, and returns how long the
// command took.
func (m *Member) Defrag(tb testing.TB) time.Duration {
	tb.Helper()
	start := time.Now()
	out, err := exec.Command(EtcdctlBinary(tb), "defrag", "--endpoints="+m.clientAddr,
		"--command-timeout="+readyTimeout.String()).CombinedOutput()
	took := time.Since(start)
	if err != nil {
		tb.Fatalf("etcdtest: defrag %s: %v\n%s", m.name, err, out)
	}
	return took
}
