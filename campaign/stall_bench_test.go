package campaign_test

import (
	"os"
	"testing"
	"time"

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
