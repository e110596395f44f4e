package faultproxy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// TestEtcdClientThroughBlackhole checks the proxy against what it is for: a
// gRPC etcd client. gRPC clamps keepalive pings to at least 10 s, so this
// does not wait for the client to give up on the connection; it checks the
// part that matters to callers: requests make no progress, on the existing
// connection or on a new one, until Pass, and then work without help.
func TestEtcdClientThroughBlackhole(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd server")
	}
	c := etcdtest.Start(t, etcdtest.Options{})
	p := newProxy(t, c.Member(0).ClientAddr())
	cli := etcdtest.NewClient(t, p.Addr())
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		_, err := cli.Get(ctx, "k")
		return err
	}
	if err := get(30 * time.Second); err != nil {
		t.Fatalf("get through passing proxy: %v", err)
	}

	p.Blackhole()
	if err := get(silence); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get through blackhole = %v, want deadline exceeded", err)
	}
	fresh := etcdtest.NewClient(t, p.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), silence)
	_, err := fresh.Get(ctx, "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get on a new client through blackhole = %v, want deadline exceeded", err)
	}

	p.Pass()
	if err := get(30 * time.Second); err != nil {
		t.Fatalf("get after Pass: %v", err)
	}

	p.Reset()
	if err := get(silence); err == nil {
		t.Fatal("get through reset succeeded")
	}
	p.Pass()
	if _, err := cli.Put(t.Context(), "k", "v"); err != nil {
		t.Fatalf("put after reset and Pass: %v", err)
	}
}
