package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

const (
	rootPassword  = "root-Pw-7f3a"
	alicePassword = "alice-Pw-9q#Z!k2" // appears nowhere but in etcd and the sources under test
)

// startAuthEtcd starts etcd with auth enabled and a user alice whose role
// may read and write only election "reports": the queue prefix
// etcdlead/reports/, the sentinel prefix etcdlead/reports.lease/, the
// record prefix etcdlead/reports.term/ and the resign-request key
// etcdlead/reports.resign, the run records' prefix
// etcdlead/reports.run/, the health verdicts' prefix
// etcdlead/reports.health/, and read the pause key etcdlead/reports.pause,
// as docs/security.md sets them up. It returns the cluster and a root
// client.
func startAuthEtcd(t *testing.T) (*etcdtest.Cluster, *clientv3.Client) {
	t.Helper()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	c := cluster.Client(t)
	ctx := ctxT(t)
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.RoleAdd(ctx, "etcdlead-reports"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "etcdlead-reports", "etcdlead/reports/",
				clientv3.GetPrefixRangeEnd("etcdlead/reports/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error {
			_, err := c.RoleGrantPermission(ctx, "etcdlead-reports", "etcdlead/reports.lease/",
				clientv3.GetPrefixRangeEnd("etcdlead/reports.lease/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error {
			_, err := c.RoleGrantPermission(ctx, "etcdlead-reports", "etcdlead/reports.term/",
				clientv3.GetPrefixRangeEnd("etcdlead/reports.term/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error {
			_, err := c.RoleGrantPermission(ctx, "etcdlead-reports", "etcdlead/reports.health/",
				clientv3.GetPrefixRangeEnd("etcdlead/reports.health/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error {
			_, err := c.RoleGrantPermission(ctx, "etcdlead-reports", "etcdlead/reports.run/",
				clientv3.GetPrefixRangeEnd("etcdlead/reports.run/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error {
			_, err := c.RoleGrantPermission(ctx, "etcdlead-reports", "etcdlead/reports.resign", "",
				clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error {
			_, err := c.RoleGrantPermission(ctx, "etcdlead-reports", "etcdlead/reports.pause", "",
				clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, "alice", alicePassword); return err },
		func() error { _, err := c.UserGrantRole(ctx, "alice", "etcdlead-reports"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("auth setup: %v", err)
		}
	}
	cfg := etcdtest.ClientConfig(cluster.Endpoints()...)
	cfg.Username, cfg.Password = "root", rootPassword
	root, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return cluster, root
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A user whose role covers one election leads it, whichever way its password
// is given; the password reaches neither the logs (at trace level) nor the
// child's environment. The same user on another election, a wrong password
// and no user at all are each one line and 125 at once, with nothing left in
// etcd.
func TestAuthPasswordSourcesAndRefusals(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster, root := startAuthEtcd(t)
	ep := "--endpoints=" + cluster.Endpoints()[0]
	pwFile := writeFile(t, "password", alicePassword+"\n")
	// The child prints its whole environment.
	run := func(env []string, flags ...string) outcome {
		args := append([]string{"run", ep, "--election=reports", "--ttl=2s", "--log-level=trace"}, flags...)
		return runEtcdlead(t, env, append(args, "--", "env")...)
	}
	for _, tc := range []struct {
		name  string
		env   []string
		flags []string
	}{
		{"--password-file", nil, []string{"--user=alice", "--password-file=" + pwFile}},
		{"ETCDLEAD_PASSWORD", []string{"ETCDLEAD_PASSWORD=" + alicePassword}, []string{"--user=alice"}},
		{"ETCDCTL_PASSWORD", []string{"ETCDCTL_USER=alice", "ETCDCTL_PASSWORD=" + alicePassword}, nil},
		{"ETCDCTL_USER=user:password", []string{"ETCDCTL_USER=alice:" + alicePassword}, nil},
		{"ETCDLEAD_USER=user:password", []string{"ETCDLEAD_USER=alice:" + alicePassword}, nil},
		{"ETCDLEAD_PASSWORD_FILE", []string{"ETCDLEAD_USER=alice", "ETCDLEAD_PASSWORD_FILE=" + pwFile}, nil},
	} {
		o := run(tc.env, tc.flags...)
		if o.code != 0 || !strings.Contains(o.stdout, "ETCDLEAD_NAME=reports\n") {
			t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", tc.name, o.code, o.stdout, o.stderr)
		}
		if !strings.Contains(o.stderr, "[DEBUG] etcdlead.keeper: child started") {
			t.Errorf("%s: no debug lines, so the log check proves less:\n%s", tc.name, o.stderr)
		}
		if strings.Contains(o.stdout, alicePassword) {
			t.Errorf("%s: the child's environment holds the password:\n%s", tc.name, o.stdout)
		}
		if strings.Contains(o.stderr, alicePassword) {
			t.Errorf("%s: the log holds the password:\n%s", tc.name, o.stderr)
		}
	}
	nothingLeft(t, root, "etcdlead/")

	line := run(nil, "--user=alice", "--password-file="+pwFile, "--election=other").failure(t, 125,
		"permission denied", `etcd user "alice" may not use key "etcdlead/other/`,
		`readwrite on prefix "etcdlead/other/", on prefix "etcdlead/other.lease/", on prefix "etcdlead/other.term/" and on key "etcdlead/other.resign", and read on key "etcdlead/other.pause"`)
	t.Logf("another election: %s", line)
	nothingLeft(t, root, "etcdlead/")

	wrong := "wrong-" + alicePassword
	o := run([]string{"ETCDLEAD_PASSWORD=" + wrong}, "--user=alice")
	line = o.failure(t, 125, `etcd refused user "alice"`, "authentication failed", "check --user and the password")
	if strings.Contains(o.stderr, wrong) {
		t.Errorf("the log holds the wrong password:\n%s", o.stderr)
	}
	t.Logf("wrong password: %s", line)
	line = run(nil, "--user=alice").failure(t, 125, `user "alice" has no password`, "--password-file")
	t.Logf("no password: %s", line)
	line = run(nil).failure(t, 125, "etcd has authentication enabled", "give --user")
	t.Logf("no user: %s", line)
	line = runEtcdlead(t, nil, "resign", ep, "--election=other", "--user=alice", "--password-file="+pwFile).failure(t, 125,
		"permission denied", `may not use key "etcdlead/other/"`)
	t.Logf("resign of another election: %s", line)
	nothingLeft(t, root, "etcdlead/")
}

// The whole life of an election under a role that covers only it: a leader,
// a waiter that watches it and checks its lease, `etcdlead resign` through
// the resign-request key, and the handover.
func TestAuthRoleCoversWholeElection(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	root, e, pw, c1, c2 := aliceLeaderAndWaiter(t)
	out, errs, code := e.etcdleadCmd("resign", "--election=reports", "--user=alice", pw)
	if code != 0 || !strings.Contains(out, "c1 stepped down") {
		t.Fatalf("resign as alice: exit %d, %q %q", code, out, errs)
	}
	c2.out.waitFor(t, "c2", "ready", 0)
	c1.log.waitFor(t, "c1", "waiting on predecessor", 0)
	stopAll(t, e, c1, c2)
	for _, c := range []*candidate{c1, c2} {
		for _, bad := range []string{"permission denied", "renewal failed", "campaign failed", alicePassword} {
			if _, ok := c.log.find(bad); ok {
				t.Errorf("%s logged %q:\n%s", c.name, bad, c.log)
			}
		}
	}
	nothingLeft(t, root, "etcdlead/")
}

// With a user, etcdlead started while etcd is down waits for it, as it does
// without one: clientv3.New would log in at once and fail.
func TestAuthEtcdDownAtStart(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster, _ := startAuthEtcd(t)
	m := cluster.Member(0)
	m.Stop(t)
	e := newEnv(t, cluster.Endpoints())
	e.prefix = "etcdlead/"
	c := e.start("early", append([]string{"--election=reports", "--user=alice", "--dial-timeout=500ms"}, fast...),
		e.probe(), "ETCDLEAD_PASSWORD="+alicePassword)
	c.log.waitFor(t, "early", "campaign failed", 0)
	m.RestartAs(t, "root", rootPassword)
	c.out.waitFor(t, "early", "ready", 0)
	c.signal(t, syscall.SIGTERM)
	c.exit(t)
}

// A candidate whose permission is revoked while it waits gets 125 and a
// "permission denied" line when it next needs the queue: not the conflict
// code, as if another candidate led.
func TestAuthPermissionRevokedWhileWaiting(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	root, e, pw, c1, c2 := aliceLeaderAndWaiter(t)
	if _, err := root.RoleRevokePermission(ctxT(t), "etcdlead-reports", "etcdlead/reports/",
		clientv3.GetPrefixRangeEnd("etcdlead/reports/")); err != nil {
		t.Fatal(err)
	}
	c1.signal(t, syscall.SIGTERM)
	c1.exit(t)
	if code := c2.exit(t); code != 125 {
		t.Errorf("c2 exit %d, want 125", code)
	}
	if _, ok := c2.log.find("permission denied"); !ok {
		t.Errorf("c2 did not say permission denied:\n%s", c2.log)
	}
	if _, ok := c2.out.find("ready"); ok {
		t.Error("c2 started a child without permission")
	}
	// c1 could not end its term nor revoke its lease any more (etcd checks
	// the lease's keys against the role), nor maybe c2: the keys go when
	// the leases expire, and their records stay, for the next candidate to
	// clear once the permission is back: the leases are gone and no raft
	// leader change came since.
	if _, ok := c1.log.find("may not revoke lease"); !ok {
		t.Errorf("c1 did not explain its failed revoke:\n%s", c1.log)
	}
	for _, prefix := range []string{"etcdlead/reports/", "etcdlead/reports.lease/"} {
		waitEmpty(t, root, prefix)
	}
	if _, err := root.RoleGrantPermission(ctxT(t), "etcdlead-reports", "etcdlead/reports/",
		clientv3.GetPrefixRangeEnd("etcdlead/reports/"), clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		t.Fatal(err)
	}
	o := runEtcdlead(t, nil, "run", "--once", "--no-wait", "--endpoints="+e.endpoints[0], "--election=reports", "--user=alice", pw,
		"--ttl=2s", "--", "sh", "-c", "echo started")
	if o.code != 0 || o.stdout != "started\n" {
		t.Errorf("a candidate after the permission came back: exit %d, %q\n%s", o.code, o.stdout, o.stderr)
	}
	nothingLeft(t, root, "etcdlead/")
}

// waitEmpty waits until no key is left under prefix, watching for deletes.
func waitEmpty(t *testing.T, cli *clientv3.Client, prefix string) {
	t.Helper()
	ctx := ctxT(t)
	for {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == 0 {
			return
		}
		wctx, cancel := context.WithCancel(ctx)
		wch := cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut())
		select {
		case <-wch:
		case <-ctx.Done():
			t.Fatalf("keys under %s still there after %s", prefix, safety)
		}
		cancel()
	}
}

// aliceLeaderAndWaiter starts an etcd with auth and, as user alice, a
// leader c1 and a waiter c2 in election "reports".
func aliceLeaderAndWaiter(t *testing.T) (*clientv3.Client, *env, string, *candidate, *candidate) {
	t.Helper()
	cluster, root := startAuthEtcd(t)
	e := newEnv(t, cluster.Endpoints())
	e.prefix = "etcdlead/"
	pw := "--password-file=" + writeFile(t, "password", alicePassword)
	flags := append([]string{"--election=reports", "--user=alice", pw}, fast...)
	c1, c2 := e.leaderAndWaiter(flags)
	return root, e, pw, c1, c2
}

// A role that may not read the resign-request key: the candidate needs it
// (it watches for requests from its first transaction on), so the refusal
// is one line and 125 before any child starts, not a child stopped at once
// after every start.
func TestAuthRoleWithoutResignKeyIsRefused(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	refusedWithout(t, "etcdlead/reports.resign", `on key "etcdlead/reports.resign"`)
}

// A role that may not read the pause key: a pause that cannot be read is
// a refusal, one line and 125 before any child starts, never taken for
// an election that is not paused.
func TestAuthRoleWithoutPauseKeyIsRefused(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	refusedWithout(t, "etcdlead/reports.pause", `read on key "etcdlead/reports.pause"`)
}

// A role without the term records' prefix (a role made for an etcdlead
// from before records) is refused before any child, with a line that names
// the prefix to grant.
func TestAuthRoleWithoutRecordPrefixIsRefused(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	refusedWithout(t, "etcdlead/reports.term/", `on prefix "etcdlead/reports.term/"`)
}

// A role that may not use the run records' prefix, with --run-id: a
// record that cannot be read is a refusal, never taken for a firing not
// run yet, and the line names the prefix to grant.
func TestAuthRoleWithoutRunPrefixIsRefused(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	refusedWithout(t, "etcdlead/reports.run/", `on prefix "etcdlead/reports.run/"`, "--run-id=20261205T1000")
}

// refusedWithout takes key (a prefix when it ends in '/') from the role of
// startAuthEtcd and checks that a candidate run with flags is refused with
// a line that says hint, before any child starts and with nothing left in
// etcd.
func refusedWithout(t *testing.T, key, hint string, flags ...string) {
	t.Helper()
	cluster, root := startAuthEtcd(t)
	end := ""
	if strings.HasSuffix(key, "/") {
		end = clientv3.GetPrefixRangeEnd(key)
	}
	if _, err := root.RoleRevokePermission(ctxT(t), "etcdlead-reports", key, end); err != nil {
		t.Fatal(err)
	}
	pw := "--password-file=" + writeFile(t, "password", alicePassword)
	args := append([]string{"run", "--endpoints=" + cluster.Endpoints()[0], "--election=reports", "--user=alice", pw, "--ttl=2s"}, flags...)
	o := runEtcdlead(t, nil, append(args, "--", "sh", "-c", "echo started")...)
	o.failure(t, 125, "permission denied", hint)
	if o.stdout != "" {
		t.Errorf("a child ran: %q", o.stdout)
	}
	nothingLeft(t, root, "etcdlead/")
}

// A status role of the four keys docs/security.md names, without the health
// verdicts' prefix: status, and status --watch, show the election without
// the verdicts, never a refusal.
func TestAuthStatusWithoutHealthGrant(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster, root := startAuthEtcd(t)
	if _, err := root.RoleRevokePermission(ctxT(t), "etcdlead-reports", "etcdlead/reports.health/",
		clientv3.GetPrefixRangeEnd("etcdlead/reports.health/")); err != nil {
		t.Fatal(err)
	}
	pw := "ETCDLEAD_PASSWORD=" + alicePassword
	o := runEtcdlead(t, []string{pw}, "status", "--endpoints="+cluster.Endpoints()[0], "--election=reports", "--user=alice")
	if o.code != 3 || !strings.Contains(o.stdout, "(no leader)") {
		t.Errorf("status without the health grant: exit %d, stdout %q, stderr %q; want 3 and no leader", o.code, o.stdout, o.stderr)
	}
	e := newEnv(t, cluster.Endpoints())
	e.prefix = "etcdlead/"
	w := e.watchStatus("reports", []string{pw}, "--user=alice")
	_, at := w.out.waitFor(t, "watch", "state=no-leader waiting=0", 0)
	// The stream goes on past the refused watch of the verdicts.
	c := e.start("c1", []string{"--election=reports", "--user=alice", "--ttl=2s"}, e.probe(), pw)
	c.out.waitFor(t, "c1", "ready", 0)
	w.out.waitFor(t, "watch", "state=leading leader=c1", at+1)
	stopWatch(t, w)
	stopAll(t, e, c)
}
