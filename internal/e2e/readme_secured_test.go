package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// The etcdctl commands of docs/security.md, "Running against a secured
// etcd", set up a role that lets its user lead that election and no
// other, on an etcd that wants TLS client certificates too; and, as the
// section says, a certificate whose CN is an etcd user stands for user and
// password.
func TestReadmeSecuredEtcdSetup(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	p := newPKI(t)
	cluster, ep := etcdtest.StartTLS(t, etcdtest.Options{},
		etcdtest.TLS{CertFile: p.server, KeyFile: p.serverKey, ClientCAFile: p.ca})
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(etcdtest.EtcdctlBinary(t), filepath.Join(bin, "etcdctl")); err != nil {
		t.Fatal(err)
	}
	for name, pw := range map[string]string{"root.password": rootPassword, "reports.password": alicePassword} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCDCTL_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"ETCDCTL_ENDPOINTS="+ep, "ETCDCTL_CACERT="+p.ca, "ETCDCTL_CERT="+p.client, "ETCDCTL_KEY="+p.clientKey)
	setup := exec.Command("sh", "-eu", "-c", docBlock(t, "docs/security.md", "## Running against a secured etcd"))
	setup.Dir, setup.Env = dir, env
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("docs/security.md's setup failed: %v\n%s", err, out)
	}

	tls := []string{"--endpoints=" + ep, "--cacert=" + p.ca, "--cert=" + p.client, "--key=" + p.clientKey}
	user := append(tls, "--user=reports", "--password-file="+filepath.Join(dir, "reports.password"))
	run := func(flags []string, election string) outcome {
		args := append(append([]string{"run"}, flags...), "--election="+election, "--", "sh", "-c", "echo leading $ETCDLEAD_NAME")
		return runEtcdlead(t, nil, args...)
	}
	if o := run(user, "reports"); o.code != 0 || o.stdout != "leading reports\n" {
		t.Fatalf("user reports on election reports: exit %d, %q\n%s", o.code, o.stdout, o.stderr)
	}
	run(user, "other").failure(t, 125, "permission denied", `etcd user "reports" may not use key "etcdlead/other/`,
		`on prefix "etcdlead/other/", on prefix "etcdlead/other.lease/", on prefix "etcdlead/other.term/" and on key "etcdlead/other.resign", and read on key "etcdlead/other.pause"`)

	// The client certificate's CN, as a user without password, with the role.
	cn := exec.Command("sh", "-eu", "-c", `
export ETCDCTL_USER=root ETCDCTL_PASSWORD="$(cat root.password)"
etcdctl user add etcdlead-tls --no-password
etcdctl user grant-role etcdlead-tls etcdlead-reports`)
	cn.Dir, cn.Env = dir, env
	if out, err := cn.CombinedOutput(); err != nil {
		t.Fatalf("adding the CN user: %v\n%s", err, out)
	}
	if o := run(tls, "reports"); o.code != 0 || o.stdout != "leading reports\n" {
		t.Fatalf("certificate alone on election reports: exit %d, %q\n%s", o.code, o.stdout, o.stderr)
	}
	run(tls, "other").failure(t, 125, "permission denied", `this client may not use key "etcdlead/other/`)

	cfg := etcdtest.ClientConfig(cluster.Endpoints()...)
	cfg.Username, cfg.Password = "root", rootPassword
	rc, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// The role is exactly the one TestAuthRoleCoversWholeElection proves
	// sufficient for a whole election's life, resign included.
	role, err := rc.RoleGet(ctxT(t), "etcdlead-reports")
	if err != nil {
		t.Fatal(err)
	}
	var perms []string
	for _, p := range role.Perm {
		perms = append(perms, fmt.Sprintf("%s [%s, %s)", p.PermType, p.Key, p.RangeEnd))
	}
	want := []string{"READWRITE [etcdlead/reports.health/, etcdlead/reports.health0)", "READWRITE [etcdlead/reports.lease/, etcdlead/reports.lease0)",
		"READ [etcdlead/reports.pause, )", "READWRITE [etcdlead/reports.resign, )", "READWRITE [etcdlead/reports.run/, etcdlead/reports.run0)",
		"READWRITE [etcdlead/reports.term/, etcdlead/reports.term0)", "READWRITE [etcdlead/reports/, etcdlead/reports0)"}
	if !slices.Equal(perms, want) {
		t.Errorf("docs/security.md's role has %q, want %q", perms, want)
	}
	nothingLeft(t, rc, "etcdlead/")
}
