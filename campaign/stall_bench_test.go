package campaign_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

const idleWindow = 30 * time.Second

// TestIdleElectionRequests logs what an idle election (a leader and a
// waiter, default TTL) costs etcd per second, by method; it asserts
// nothing (the figures are the report's). Run it by name, with
// ETCDLEAD_COST=1.
func TestIdleElectionRequests(t *testing.T) {
	if testing.Short() || !costRequested() {
		t.Skip("a 30 s measurement; set ETCDLEAD_COST=1")
	}
	cluster := etcdtest.Start(t, etcdtest.Options{})
	m := cluster.Member(0)
	fa := newFixture(t, etcdtest.NewClient(t, cluster.Endpoints()...))
	fb := newFixture(t, etcdtest.NewClient(t, cluster.Endpoints()...))
	fa.ttl, fb.ttl = 15*time.Second, 15*time.Second
	fb.n = 1
	a := fa.lead()
	held := hold(a)
	b := fb.waiting(t.Context(), 1)
	fb.next(b, newest(t, fb.cli, fb.l))
	methods := []string{"Watch", "Txn", "Range", "LeaseKeepAlive", "LeaseTimeToLive"}
	count := func() map[string]int {
		out := map[string]int{}
		for _, k := range methods {
			out[k] = m.GRPCCount(t, "grpc_server_msg_received_total", k)
		}
		return out
	}
	before := count()
	time.Sleep(idleWindow) // the window measured, not a wait for an event
	after := count()
	for _, k := range methods {
		t.Logf("%-16s %.3f/s per election", k, float64(after[k]-before[k])/idleWindow.Seconds())
	}
	select {
	case err := <-held:
		t.Fatalf("the leader's term ended: %v", err)
	default:
	}
}

func costRequested() bool { return os.Getenv("ETCDLEAD_COST") == "1" }

// etcdCPU is the CPU time the etcd process serving dataDir has used.
func etcdCPU(t *testing.T, dataDir string) time.Duration {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmd), dataDir) || !strings.Contains(string(cmd), "--name") {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		u, _ := strconv.Atoi(f[11])
		s, _ := strconv.Atoi(f[12])
		return time.Duration(u+s) * 10 * time.Millisecond
	}
	t.Fatal("no etcd process")
	return 0
}

// TestProgressRequestCost logs etcd's CPU per guard read (the old
// re-read: a linearizable transaction of three gets) and per progress
// request on a stream with a term's four watches; it asserts nothing.
func TestProgressRequestCost(t *testing.T) {
	if testing.Short() || !costRequested() {
		t.Skip("a measurement; set ETCDLEAD_COST=1")
	}
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := etcdtest.NewClient(t, cluster.Endpoints()...)
	ctx := clientv3.WithRequireLeader(t.Context())
	resp, err := cli.Put(ctx, "k", "v")
	if err != nil {
		t.Fatal(err)
	}
	w := clientv3.NewWatcher(cli)
	defer w.Close()
	probe := w.Watch(ctx, "p", clientv3.WithCreatedNotify())
	<-probe
	for _, k := range []string{"k", "s", "r"} {
		w.Watch(ctx, k, clientv3.WithRev(resp.Header.Revision), clientv3.WithProgressNotify())
	}
	time.Sleep(300 * time.Millisecond) // the watches catch up with their history
	const n = 5000
	dir := cluster.Member(0).DataDir()
	c0 := etcdCPU(t, dir)
	for range n {
		if _, err := cli.Txn(ctx).Then(clientv3.OpGet("k"), clientv3.OpGet("s"), clientv3.OpGet("r")).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	c1 := etcdCPU(t, dir)
	for range n {
		if err := w.RequestProgress(ctx); err != nil {
			t.Fatal(err)
		}
		<-probe
	}
	c2 := etcdCPU(t, dir)
	t.Logf("etcd CPU per guard read: %s; per progress request: %s", (c1-c0)/n, (c2-c1)/n)
}
