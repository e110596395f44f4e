package etcdconn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// safety bounds every wait on an event; it is never what a test measures.
const safety = 30 * time.Second

const (
	rootPassword  = "root-Pw-7f3a"
	alicePassword = "alice-Pw-9q#Z!k2"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	return ctx
}

// skipIfShort leaves a test to the full suite under go test -short, which
// keeps authentication and TLS on real etcd: the refusals beside a serving
// or a stopped etcd run in the full suite only.
func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: runs in the full suite (go test -race -p 1 ./...)")
	}
}

// startAuthEtcd starts etcd with auth enabled and a user alice who may
// read and write the keys of election "reports" under etcdlead/ only.
func startAuthEtcd(t *testing.T) *etcdtest.Cluster {
	t.Helper()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	c := cluster.Client(t)
	ctx := ctxT(t)
	rw := clientv3.PermissionType(clientv3.PermReadWrite)
	for _, step := range []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.RoleAdd(ctx, "reports"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "reports", "etcdlead/reports/", clientv3.GetPrefixRangeEnd("etcdlead/reports/"), rw)
			return err
		},
		func() error { _, err := c.UserAdd(ctx, "alice", alicePassword); return err },
		func() error { _, err := c.UserGrantRole(ctx, "alice", "reports"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("auth setup: %v", err)
		}
	}
	return cluster
}

func newClient(t *testing.T, cfg Config) *clientv3.Client {
	t.Helper()
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	cli, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// authenticates is how many logins etcd has answered.
func authenticates(t *testing.T, m *etcdtest.Member) int {
	t.Helper()
	return m.GRPCCount(t, "grpc_server_handled_total", "Authenticate")
}

func TestAuth(t *testing.T) {
	cluster := startAuthEtcd(t)

	// The client logs in once, keeps the token for every request and
	// lease renewal (so a renewal costs etcd no password hash), and logs
	// in again when etcd rejects the token: a restarted etcd has
	// forgotten its (simple) tokens.
	t.Run("token-kept-and-renewed", func(t *testing.T) {
		cli := newClient(t, Config{Endpoints: cluster.Endpoints(), User: "alice", Password: alicePassword})
		m := cluster.Member(0)
		busy := func(when string) {
			t.Helper()
			before := authenticates(t, m)
			lease, err := cli.Grant(ctxT(t), 5)
			if err != nil {
				t.Fatalf("grant %s: %v", when, err)
			}
			for range 10 {
				if _, err := cli.Get(ctxT(t), "etcdlead/reports/x"); err != nil {
					t.Fatalf("get %s: %v", when, err)
				}
				if _, err := cli.KeepAliveOnce(ctxT(t), lease.ID); err != nil {
					t.Fatalf("renewal %s: %v", when, err)
				}
			}
			if n := authenticates(t, m) - before; n != 1 {
				t.Errorf("%s: etcd answered %d logins for 10 reads and 10 renewals, want 1", when, n)
			}
		}
		busy("from the start")
		m.RestartAs(t, "root", rootPassword)
		busy("after etcd restarted")
	})

	// A wrong password is refused for good, with a line that names the
	// user and where the password comes from, never the password.
	t.Run("wrong-password", func(t *testing.T) {
		cli := newClient(t, Config{Endpoints: cluster.Endpoints(), User: "alice", Password: "not-" + alicePassword})
		_, err := cli.Get(ctxT(t), "etcdlead/reports/x")
		switch {
		case err == nil:
			t.Fatal("a wrong password was accepted")
		case !campaign.Permanent(err):
			t.Errorf("a wrong password is retried: %v", err)
		case !errors.Is(err, rpctypes.ErrAuthFailed):
			t.Errorf("refusal %v does not unwrap to etcd's ErrAuthFailed", err)
		case !strings.Contains(err.Error(), `user "alice"`) || !strings.Contains(err.Error(), "--password-file"):
			t.Errorf("refusal does not name the user and the fix: %v", err)
		case strings.Contains(err.Error(), alicePassword):
			t.Errorf("refusal shows the password: %v", err)
		}
	})

	// A missing permission names the key and every grant the election
	// needs.
	t.Run("permission-denied", func(t *testing.T) {
		cli := newClient(t, Config{Endpoints: cluster.Endpoints(), User: "alice", Password: alicePassword})
		_, err := cli.Put(ctxT(t), "etcdlead/other/1", "x")
		if err == nil || !campaign.Permanent(err) || !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("put outside the role: %v, want a permanent permission refusal", err)
		}
		for _, want := range []string{`etcd user "alice"`, `key "etcdlead/other/1"`,
			`prefix "etcdlead/other/"`, `prefix "etcdlead/other.lease/"`, `prefix "etcdlead/other.term/"`, `key "etcdlead/other.resign"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal lacks %s: %v", want, err)
			}
		}
	})

	// Without a user, an auth-enabled etcd is named as the cause.
	t.Run("no-user", func(t *testing.T) {
		cli := newClient(t, Config{Endpoints: cluster.Endpoints()})
		_, err := cli.Get(ctxT(t), "etcdlead/reports/x")
		if err == nil || !campaign.Permanent(err) || !strings.Contains(err.Error(), "authentication enabled") {
			t.Errorf("get without a user: %v", err)
		}
	})
}

// Without etcd, a client with a user is still made, and a request fails as
// an unreachable etcd does: retried, not permanent. (Nothing listens on
// port 1, so the request ends at once with the refusal: see
// TestRefusedAtOnce.)
func TestNewDoesNotDial(t *testing.T) {
	cli := newClient(t, Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: 200 * time.Millisecond,
		User: "alice", Password: alicePassword})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := cli.Get(ctx, "x")
	var u *Unreached
	if !errors.As(err, &u) || campaign.Permanent(err) {
		t.Fatalf("get with etcd down: %v (permanent %v), want etcd unreachable, retried", err, campaign.Permanent(err))
	}
}

// Bad configuration fails in New, with a line that names it.
func TestNewRefusesBadConfiguration(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"credentials in the URL", Config{Endpoints: []string{"http://alice:s3cret@127.0.0.1:2379"}}, "holds credentials"},
		{"user without password", Config{Endpoints: []string{"127.0.0.1:2379"}, User: "alice"}, "has no password"},
		{"TLS asked over http", Config{Endpoints: []string{"http://127.0.0.1:2379"}, InsecureTLS: true}, "plain http"},
		{"missing CA file", Config{Endpoints: []string{"https://127.0.0.1:2379"}, CACert: "/nonexistent/ca.pem"}, "--cacert"},
	} {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error with %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}
}

// gRPC's last connection error, as the client's status messages carry it,
// is worded as its cause; a message without one is left alone.
func TestConnCause(t *testing.T) {
	for msg, want := range map[string]string{
		`latest balancer error: connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`:                                                                        "connection refused at 127.0.0.1:1: is etcd running, and listening on that port?",
		`latest balancer error: connection error: desc = "transport: Error while dialing: dial tcp: lookup etcd.invalid on 10.0.0.53:53: no such host"`:                                                              "name etcd.invalid not resolved (no such host)",
		`latest balancer error: connection error: desc = "transport: Error while dialing: dial tcp 10.0.0.9:2379: i/o timeout"`:                                                                                      "no answer from 10.0.0.9:2379 (connect timed out): is a firewall dropping it?",
		`latest balancer error: connection error: desc = "error reading server preface: http2: failed reading the frame payload: http2: frame too large, note that the frame header looked like an HTTP/1.1 header"`: "the server answered in HTTP/1.1, not in etcd's gRPC: check the endpoint's port",
		`latest balancer error: connection error: desc = "transport: authentication handshake failed: EOF"`:                                                                                                          "TLS handshake failed: EOF",
		`context deadline exceeded`: "",
	} {
		if got := connCause(msg); got != want {
			t.Errorf("connCause(%q) = %q, want %q", msg, got, want)
		}
	}
}

// The plain-text probe tells a plain HTTP server from a TLS one: Go's TLS
// servers answer a plain request with a 400 that names HTTPS, and must not
// be taken for plain text.
func TestPlainTextProbe(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, `{"etcdserver":"3.6.0"}`)
	}))
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer tlsSrv.Close()
	ctx := context.Background()
	if !plainText(ctx, strings.TrimPrefix(plain.URL, "http://")) {
		t.Error("a plain HTTP server was not taken for plain text")
	}
	if plainText(ctx, strings.TrimPrefix(tlsSrv.URL, "https://")) {
		t.Error("a TLS server was taken for plain text")
	}
}
