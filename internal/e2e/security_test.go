package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
	"github.com/etcdlead/etcdlead/internal/testsupport/testcert"
)

// outcome is one etcdlead run to its end.
type outcome struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// runEtcdlead runs the binary with args and extra environment variables and
// waits for it to end (bounded by safety).
func runEtcdlead(t *testing.T, extraEnv []string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(etcdleadBin(), args...)
	cmd.Env = append(cmd.Environ(), extraEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(safety, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	o := outcome{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if strings.Contains(o.stderr, "WARNING: DATA RACE") {
		t.Errorf("etcdlead %v: the race detector found a data race:\n%s", args, o.stderr)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		o.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("etcdlead %v: %v", args, err)
	}
	return o
}

// logLine matches a line of etcdlead's (or its keeper's) log.
var logLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\S+ \[(TRACE|DEBUG|INFO|WARN|ERROR)\] `)

// failure checks that etcdlead ended with code and exactly one line besides
// its log, "etcdlead: ..." containing every one of wants, that nothing went
// to stdout, and that no attempt was retried. It returns the line.
func (o outcome) failure(t *testing.T, code int, wants ...string) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(o.stderr, "\n"), "\n") {
		if l != "" && !logLine.MatchString(l) {
			lines = append(lines, l)
		}
	}
	if o.code != code || len(lines) != 1 || !strings.HasPrefix(lines[0], "etcdlead: ") {
		t.Fatalf("exit %d, want %d with one line of error; stderr:\n%s", o.code, code, o.stderr)
	}
	for _, w := range wants {
		if !strings.Contains(lines[0], w) {
			t.Errorf("error line %q does not say %q", lines[0], w)
		}
	}
	if o.stdout != "" {
		t.Errorf("stdout is not empty: %q", o.stdout)
	}
	if strings.Contains(o.stderr, "campaign failed") {
		t.Errorf("a refusal was retried:\n%s", o.stderr)
	}
	return lines[0]
}

// nothingLeft checks that no key under prefix and no lease at all remain:
// cli's etcd must serve no one else while this runs.
func nothingLeft(t *testing.T, cli *clientv3.Client, prefix string) {
	t.Helper()
	resp, err := cli.Get(ctxT(t), prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		t.Errorf("key left behind: %s", kv.Key)
	}
	leases, err := cli.Leases(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Leases {
		t.Errorf("lease left behind: %x", l.ID)
	}
}

// pki is what the TLS tests use: one CA that signs etcd's and the client's
// certificates, and one that signs nothing etcd knows.
type pki struct {
	ca, otherCA                  string
	server, serverKey            string
	client, clientKey            string
	expiredClient, expiredKey    string
	strangerClient, strangerKey  string
	expiredServer, expiredSrvKey string
}

func newPKI(t *testing.T) pki {
	dir := t.TempDir()
	ca := testcert.NewAuthority(t, "etcdlead test CA")
	other := testcert.NewAuthority(t, "some other CA")
	lastWeek := testcert.Options{NotBefore: time.Now().Add(-7 * 24 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}
	var p pki
	p.ca = ca.WriteCA(t, dir, "ca.pem")
	p.otherCA = other.WriteCA(t, dir, "other-ca.pem")
	p.server, p.serverKey = ca.Issue(t, dir, "server", testcert.Options{CommonName: "etcd", Server: true})
	p.client, p.clientKey = ca.Issue(t, dir, "client", testcert.Options{CommonName: "etcdlead-tls"})
	expired := lastWeek
	expired.CommonName = "etcdlead-tls"
	p.expiredClient, p.expiredKey = ca.Issue(t, dir, "expired-client", expired)
	p.strangerClient, p.strangerKey = other.Issue(t, dir, "stranger", testcert.Options{CommonName: "etcdlead-tls"})
	expired.Server, expired.CommonName = true, "etcd"
	p.expiredServer, p.expiredSrvKey = ca.Issue(t, dir, "expired-server", expired)
	return p
}

// etcd over https, with the server's certificate only: --cacert suffices;
// a wrong CA is one clear line and 125, at once.
func TestTLSServerCertificate(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	p := newPKI(t)
	cluster, ep := etcdtest.StartTLS(t, etcdtest.Options{}, etcdtest.TLS{CertFile: p.server, KeyFile: p.serverKey})
	hostport := strings.TrimPrefix(ep, "https://")
	args := func(extra ...string) []string {
		return append(append([]string{"run", "--election=tls", "--ttl=2s", "--dial-timeout=5s"}, extra...),
			"--", "sh", "-c", `echo leading $ETCDLEAD_NAME`)
	}
	for _, endpoint := range []string{ep, hostport} { // a scheme-less endpoint uses TLS when --cacert is given
		o := runEtcdlead(t, nil, args("--endpoints="+endpoint, "--cacert="+p.ca)...)
		if o.code != 0 || o.stdout != "leading tls\n" {
			t.Fatalf("over https with --cacert (%s): exit %d, stdout %q\n%s", endpoint, o.code, o.stdout, o.stderr)
		}
	}
	// Testing only, but it must work: no verification at all.
	if o := runEtcdlead(t, nil, args("--endpoints="+ep, "--insecure-skip-tls-verify")...); o.code != 0 || o.stdout != "leading tls\n" {
		t.Fatalf("--insecure-skip-tls-verify: exit %d, stdout %q\n%s", o.code, o.stdout, o.stderr)
	}
	line := runEtcdlead(t, nil, args("--endpoints="+ep, "--cacert="+p.otherCA)...).failure(t, 125,
		"not signed by the CA in --cacert "+p.otherCA, "certificate signed by unknown authority", "give --cacert the CA that signed etcd's certificate")
	t.Logf("wrong CA: %s", line)
	line = runEtcdlead(t, nil, args("--endpoints="+ep)...).failure(t, 125,
		"not signed by a CA this machine trusts", "give --cacert")
	t.Logf("https without --cacert: %s", line)
	line = runEtcdlead(t, nil, args("--endpoints=http://"+hostport, "--cacert="+p.ca)...).failure(t, 125,
		"is plain http, but TLS is asked for", "use https://"+hostport)
	t.Logf("http:// with --cacert: %s", line)
	nothingLeft(t, cluster.Client(t), "etcdlead/")
}

// etcd that wants client certificates: --cert and --key lead; no
// certificate, one from a CA etcd does not trust, or an expired one is one
// clear line and 125.
func TestTLSClientCertificate(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	p := newPKI(t)
	cluster, ep := etcdtest.StartTLS(t, etcdtest.Options{},
		etcdtest.TLS{CertFile: p.server, KeyFile: p.serverKey, ClientCAFile: p.ca})
	args := func(extra ...string) []string {
		return append(append([]string{"run", "--endpoints=" + ep, "--election=tls", "--ttl=2s", "--cacert=" + p.ca}, extra...),
			"--", "sh", "-c", `echo leading $ETCDLEAD_NAME`)
	}
	o := runEtcdlead(t, nil, args("--cert="+p.client, "--key="+p.clientKey)...)
	if o.code != 0 || o.stdout != "leading tls\n" {
		t.Fatalf("with a client certificate: exit %d, stdout %q\n%s", o.code, o.stdout, o.stderr)
	}
	// The same through etcdctl's variables.
	o = runEtcdlead(t, []string{"ETCDCTL_CERT=" + p.client, "ETCDCTL_KEY=" + p.clientKey}, args()...)
	if o.code != 0 || o.stdout != "leading tls\n" {
		t.Fatalf("with ETCDCTL_CERT and ETCDCTL_KEY: exit %d, stdout %q\n%s", o.code, o.stdout, o.stderr)
	}

	line := runEtcdlead(t, nil, args()...).failure(t, 125,
		"refused the TLS connection", "certificate required", "give --cert and --key")
	t.Logf("no client certificate: %s", line)
	line = runEtcdlead(t, nil, args("--cert="+p.strangerClient, "--key="+p.strangerKey)...).failure(t, 125,
		"refused this client's certificate --cert "+p.strangerClient, "unknown certificate authority", "signed by a CA that etcd trusts")
	t.Logf("client certificate from another CA: %s", line)
	line = runEtcdlead(t, nil, args("--cert="+p.expiredClient, "--key="+p.expiredKey)...).failure(t, 125,
		"client certificate --cert "+p.expiredClient+" expired at", "renew it")
	t.Logf("expired client certificate: %s", line)
	line = runEtcdlead(t, nil, args("--cert="+p.client, "--key="+p.strangerKey)...).failure(t, 125,
		"private key does not match public key", "the key that belongs to it")
	t.Logf("key of another certificate: %s", line)
	line = runEtcdlead(t, nil, args("--cert="+p.client, "--key="+p.clientKey, "--cacert="+p.client+".missing")...).failure(t, 125,
		"--cacert: "+p.client+".missing: no such file or directory")
	t.Logf("missing CA file: %s", line)
	line = runEtcdlead(t, nil, args("--cert="+p.client, "--key="+p.clientKey, "--cacert="+p.clientKey)...).failure(t, 125,
		"holds no PEM certificate")
	t.Logf("CA file that is a key: %s", line)
	nothingLeft(t, cluster.Client(t), "etcdlead/")
}

// etcd whose own certificate has expired: one clear line and 125, at once.
func TestTLSExpiredServerCertificate(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	p := newPKI(t)
	cluster, ep := etcdtest.StartTLS(t, etcdtest.Options{}, etcdtest.TLS{CertFile: p.expiredServer, KeyFile: p.expiredSrvKey})
	o := runEtcdlead(t, nil, "run", "--endpoints="+ep, "--cacert="+p.ca, "--election=tls", "--", "true")
	line := o.failure(t, 125, "etcd's certificate at "+strings.TrimPrefix(ep, "https://")+" has expired",
		"certificate has expired or is not yet valid", "renew etcd's certificate")
	t.Logf("expired server certificate: %s", line)
	nothingLeft(t, cluster.Client(t), "etcdlead/")
}
