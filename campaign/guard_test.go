package campaign_test

import (
	"context"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdtest"
)

// The guard's re-read, the backstop for a watch that stalls silently, is a
// request of its own: at the shortest TTL it keeps its floor of 5 s
// (docs/design.md, step 3) instead of T/3, which would have read the keys
// at least once in the time a leader makes eight renewals at its cadence of
// T/10.
func TestGuardRereadPace(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	var reads atomic.Int64
	cfg := etcdtest.ClientConfig(cluster.Endpoints()...)
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method == "/etcdserverpb.KV/Txn" {
				reads.Add(1)
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	f := newFixture(t, cli)
	f.ttl = campaign.MinTTL
	var n tally
	f.renewed = n.hear
	a := f.lead()
	before := reads.Load()
	held := hold(a)
	atLeast(t, &n.ok, 8, held, "renewals")
	if r := reads.Load() - before; r != 0 {
		t.Errorf("the guard read its keys %d times during %d renewals at TTL %s, want none", r, n.ok.Load(), f.ttl)
	}
}
