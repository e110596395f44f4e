package etcdconn

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// closedPort is a loopback port that nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Before etcd ever answered, endpoints that all refuse the connection end
// a request at once with the cause, rather than at its bound: the request's
// context and the dial timeout are both the safety bound here, so an error
// that comes back is the refusal. It is no permanent refusal: a run
// retries it, as etcd may be starting.
func TestRefusedAtOnce(t *testing.T) {
	a, b := closedPort(t), closedPort(t)
	cli := newClient(t, Config{Endpoints: []string{a, "http://" + b}, DialTimeout: safety})
	_, err := cli.Grant(ctxT(t), 5)
	var u *Unreached
	switch {
	case !errors.As(err, &u) || !errors.Is(err, syscall.ECONNREFUSED):
		t.Fatalf("grant with nothing listening: %v, want the refusal", err)
	case errors.Is(err, context.DeadlineExceeded):
		t.Fatalf("grant with nothing listening waited out its bound: %v", err)
	case campaign.Permanent(err):
		t.Errorf("a refused connection is taken as permanent: %v", err)
	}
	if want := "connection refused at " + a + ", " + b + ": is etcd running, and listening on that port?"; err.Error() != want {
		t.Errorf("refusal %q, want %q", err, want)
	}
}

// One endpoint that accepts keeps the request waiting for it: only when
// every endpoint refuses is the refusal known.
func TestRefusedOnlyWhenEveryEndpointRefuses(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := newClient(t, Config{Endpoints: append([]string{closedPort(t)}, cluster.Endpoints()...), DialTimeout: safety})
	for range 3 {
		if _, err := cli.Get(ctxT(t), "x"); err != nil {
			t.Fatalf("get with one endpoint refusing and one serving: %v", err)
		}
	}
}

// Once etcd has answered, a refused connection is etcd restarting: a
// request waits for it until its bound, as a renewal must (campaign).
func TestRefusedAfterContactWaits(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := newClient(t, Config{Endpoints: cluster.Endpoints(), DialTimeout: safety})
	if _, err := cli.Get(ctxT(t), "x"); err != nil {
		t.Fatal(err)
	}
	cluster.Member(0).Stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := cli.Get(ctx, "x")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("get while a known etcd is down: %v, want it to wait out its bound", err)
	}
}
