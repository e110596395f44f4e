package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// ClientConfig returns the configuration NewClient uses, for tests that need
// to change it (keepalives, timeouts) before calling clientv3.New.
//
// It has no dial timeout, so clientv3.New returns at once and requests wait
// for a connection. gRPC's reconnect backoff is capped at 200 ms instead of
// growing to minutes, so a client notices a restarted member quickly.
func ClientConfig(endpoints ...string) clientv3.Config {
	return clientv3.Config{
		Endpoints: endpoints,
		Logger:    zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff: backoff.Config{
					BaseDelay:  50 * time.Millisecond,
					Multiplier: 1.6,
					Jitter:     0.2,
					MaxDelay:   200 * time.Millisecond,
				},
				MinConnectTimeout: requestTimeout,
			}),
		},
	}
}

// NewClient returns a client for the given endpoints (any addresses, such as
// a proxy in front of a member), closed at the test's cleanup.
func NewClient(tb testing.TB, endpoints ...string) *clientv3.Client {
	tb.Helper()
	cli, err := newClient(endpoints...)
	if err != nil {
		tb.Fatalf("etcdtest: new client: %v", err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

func newClient(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(ClientConfig(endpoints...))
}

// Client returns a client for all members of the cluster, closed at the
// test's cleanup (before the cluster stops).
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return NewClient(tb, c.Endpoints()...)
}

// RaftLeader returns the index of the member that is the raft leader, as
// agreed by a quorum of members, waiting for one to be elected if needed
// (such as just after the old leader was killed).
func (c *Cluster) RaftLeader(tb testing.TB) int {
	tb.Helper()
	members := c.Members()
	cli, err := newClient(c.Endpoints()...)
	if err != nil {
		tb.Fatalf("etcdtest: new client: %v", err)
	}
	defer cli.Close()

	quorum := len(members)/2 + 1
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		votes := make(map[uint64]int)
		var lastErr error
		for _, m := range members {
			if m.running() == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			st, err := cli.Status(ctx, m.clientAddr)
			cancel()
			if err != nil {
				lastErr = err
				continue
			}
			if st.Leader != 0 {
				votes[st.Leader]++
			}
		}
		for i, m := range members {
			if id := m.memberID(); id != 0 && votes[id] >= quorum && m.running() != nil {
				return i
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("etcdtest: no leader agreed by %d members after %v (votes %v, last error %v)", quorum, readyTimeout, votes, lastErr)
		}
		<-tick.C
	}
}

// MoveLeader hands the raft leadership to member to and waits until a
// quorum agrees on it.
func (c *Cluster) MoveLeader(tb testing.TB, to int) {
	tb.Helper()
	from := c.RaftLeader(tb)
	if from == to {
		return
	}
	cli, err := newClient(c.Member(from).clientAddr)
	if err != nil {
		tb.Fatalf("etcdtest: new client: %v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if _, err := cli.MoveLeader(ctx, c.Member(to).memberID()); err != nil {
		tb.Fatalf("etcdtest: move the raft leadership to %s: %v", c.Member(to).name, err)
	}
	if got := c.RaftLeader(tb); got != to {
		tb.Fatalf("etcdtest: raft leader is member %d after moving it to %d", got, to)
	}
}
