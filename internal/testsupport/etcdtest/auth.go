package etcdtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RestartAs is Restart for a member of a cluster with auth enabled, where
// Restart's readiness check, made without a user, is refused: it waits until
// the member serves a linearizable Get to user.
func (m *Member) RestartAs(tb testing.TB, user, password string) {
	tb.Helper()
	m.Stop(tb)
	if err := m.start(); err != nil {
		tb.Fatalf("etcdtest: restart %s: %v", m.name, err)
	}
	if err := m.waitServingAs(user, password); err != nil {
		tb.Logf("etcdtest: log of %s:\n%s", m.name, logTail(m.logPath, logTailBytes))
		tb.Fatalf("etcdtest: restart %s: %v", m.name, err)
	}
}

func (m *Member) waitServingAs(user, password string) error {
	p := m.running()
	if p == nil {
		return fmt.Errorf("%w: %s", errExited, m.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	go func() {
		select {
		case <-p.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	cfg := ClientConfig(m.clientAddr)
	var err error
	// clientv3.New logs in at once and fails while the member starts, so
	// the client itself is made again until it serves.
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		reqCtx, reqCancel := context.WithTimeout(ctx, requestTimeout)
		cfg.Username, cfg.Password, cfg.Context = user, password, reqCtx
		var cli *clientv3.Client
		if cli, err = clientv3.New(cfg); err == nil {
			_, err = cli.Get(reqCtx, "etcdtest/ready")
			cli.Close()
		}
		reqCancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if p.done() {
				return fmt.Errorf("%w: %s", errExited, m.name)
			}
			return fmt.Errorf("waiting for %s: not serving after %v (last error: %v)", m.name, readyTimeout, err)
		case <-tick.C:
		}
	}
}
