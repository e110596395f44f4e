package etcdtest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func putGet(t *testing.T, endpoints []string, key, val string) {
	t.Helper()
	cli := etcdtest.NewClient(t, endpoints...)
	if _, err := cli.Put(ctx(t), key, val); err != nil {
		t.Fatalf("put %s via %v: %v", key, endpoints, err)
	}
	resp, err := cli.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("get %s via %v: %v", key, endpoints, err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != val {
		t.Fatalf("get %s via %v = %v, want %q", key, endpoints, resp.Kvs, val)
	}
}

// skipIfShort leaves a test to the full suite under go test -short, which
// keeps the one-member tests: the three-member clusters run in the full
// suite only.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: runs in the full suite (go test -race -p 1 ./...)")
	}
}

func TestSingleMember(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	if got := len(c.Endpoints()); got != 1 {
		t.Fatalf("%d endpoints, want 1", got)
	}
	putGet(t, c.Endpoints(), "k", "v1")

	resp, err := http.Get(c.Member(0).MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "etcd_server_has_leader") {
		t.Fatalf("metrics: status %d, body without etcd_server_has_leader", resp.StatusCode)
	}

	// A graceful stop and restart keeps the data.
	c.Member(0).Restart(t)
	resp2, err := c.Client(t).Get(ctx(t), "k")
	if err != nil || len(resp2.Kvs) != 1 || string(resp2.Kvs[0].Value) != "v1" {
		t.Fatalf("get after restart = %v, %v; want v1", resp2, err)
	}

	out, err := exec.Command(etcdtest.EtcdctlBinary(t), "--endpoints", c.Member(0).ClientAddr(), "get", "k", "--print-value-only").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "v1" {
		t.Fatalf("etcdctl get = %q, %v; want v1", out, err)
	}
}

func TestThreeMembersSurviveLeaderLoss(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	putGet(t, c.Endpoints(), "k", "before")

	leader := c.RaftLeader(t)
	c.Member(leader).Kill(t)
	// Waiting for the election first: a Put proposed while there is no
	// leader fails after etcd's request timeout, and clients do not retry
	// it, since a Put is not idempotent.
	if newLeader := c.RaftLeader(t); newLeader == leader {
		t.Fatalf("killed member %d is still the leader", leader)
	}

	var survivors []string
	for i, ep := range c.Endpoints() {
		if i != leader {
			survivors = append(survivors, ep)
		}
	}
	// Each survivor on its own, so a success cannot come from the other.
	for _, ep := range survivors {
		putGet(t, []string{ep}, "k-"+ep, "after")
	}

	// The restarted member catches up on what it missed while down.
	c.Member(leader).Restart(t)
	cli := etcdtest.NewClient(t, c.Member(leader).ClientAddr())
	resp, err := cli.Get(ctx(t), "k-"+survivors[0])
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "after" {
		t.Fatalf("get from restarted member = %v, %v; want after", resp, err)
	}
}

func TestRestartAllAfterQuorumLoss(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	putGet(t, c.Endpoints(), "k", "v")
	for i := range c.Endpoints() {
		c.Member(i).Stop(t)
	}
	c.RestartAll(t)
	putGet(t, c.Endpoints(), "k", "v2")
}

// Defrag reaches the member it names: the space that a delete and a
// compaction freed is given back to the file system there.
func TestDefrag(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	cli := c.Client(t)
	val := strings.Repeat("x", 1<<10)
	for i := range 20 {
		var ops []clientv3.Op
		for j := range 100 {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("k/%d/%d", i, j), val))
		}
		if _, err := cli.Txn(ctx(t)).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	del, err := cli.Delete(ctx(t), "k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx(t), del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		st, err := cli.Status(ctx(t), c.Member(0).ClientAddr())
		if err != nil {
			t.Fatal(err)
		}
		return st.DbSize
	}
	before := size()
	if took := c.Member(0).Defrag(t); took <= 0 {
		t.Errorf("defrag took %v", took)
	}
	if after := size(); after >= before {
		t.Errorf("database of %d bytes after defrag, %d before: not defragmented", after, before)
	}
}

// The helpers for one member's faults, on one 3-member cluster: MoveLeader
// hands the raft leadership where asked; a frozen member answers nothing
// until thawed; OpenStreams counts a stream while it is open.
func TestMemberFaultHelpers(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})

	to := (c.RaftLeader(t) + 1) % 3
	c.MoveLeader(t, to)
	if got := c.RaftLeader(t); got != to {
		t.Errorf("raft leader is member %d after MoveLeader(%d)", got, to)
	}

	m := c.Member((to + 1) % 3)
	cli := etcdtest.NewClient(t, m.ClientAddr())
	if _, err := cli.Get(ctx(t), "k"); err != nil {
		t.Fatal(err)
	}
	m.Freeze(t)
	short, cancel := context.WithTimeout(ctx(t), 500*time.Millisecond)
	_, err := cli.Get(short, "k")
	cancel()
	if err == nil {
		t.Error("a frozen member answered a Get")
	}
	m.Thaw(t)
	if _, err := cli.Get(ctx(t), "k"); err != nil {
		t.Errorf("a thawed member: %v", err)
	}

	before := m.OpenStreams(t, "Watch")
	wctx, stop := context.WithCancel(clientv3.WithRequireLeader(ctx(t)))
	cli.Watch(wctx, "k")
	waitStreams(t, m, "Watch", before+1)
	stop()
	waitStreams(t, m, "Watch", before)
}

// waitStreams waits until m has want streams of method open; the metrics
// change a moment after the stream does, and offer no event.
func waitStreams(t *testing.T, m *etcdtest.Member, method string, want int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := m.OpenStreams(t, method)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s streams open, want %d", got, method, want)
		}
	}
}
