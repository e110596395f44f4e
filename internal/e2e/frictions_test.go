package e2e

import (
	"bufio"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// A plain-text endpoint against etcd's https listener: run (without --wait,
// which would retry an outage for ever) and status end at once with 125
// and one line that names TLS and the fix, as https:// against a
// plain-text etcd does (testdata/script/unreached.txtar).
func TestPlainEndpointAgainstTLS(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	p := newPKI(t)
	cluster, ep := etcdtest.StartTLS(t, etcdtest.Options{}, etcdtest.TLS{CertFile: p.server, KeyFile: p.serverKey})
	hostport := strings.TrimPrefix(ep, "https://")
	wants := []string{"etcd at " + hostport + " speaks TLS, not plain text", "use https://" + hostport, "--cacert"}
	for _, endpoint := range []string{"http://" + hostport, hostport} {
		line := runEtcdlead(t, nil, "run", "--election=plain", "--ttl=2s", "--endpoints="+endpoint, "--", "true").
			failure(t, 125, append([]string{"grant lease: "}, wants...)...)
		t.Logf("run, %s: %s", endpoint, line)
		line = runEtcdlead(t, nil, "status", "--endpoints="+endpoint).failure(t, 125, append([]string{"status: "}, wants...)...)
		t.Logf("status, %s: %s", endpoint, line)
	}
	nothingLeft(t, cluster.Client(t), "etcdlead/")
}

// A run whose endpoints refuse the connection logs each failed campaign at
// once, not after --dial-timeout (an hour here, beyond the test's bound),
// and keeps retrying: etcd may be starting. A stop ends it with 0.
func TestRefusedEndpointLoggedAtOnce(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cmd := exec.Command(etcdleadBin(), "run", "--election=refused", "--endpoints=127.0.0.1:1", "--dial-timeout=1h", "--", "true")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	const want = `campaign failed: error="grant lease: connection refused at 127.0.0.1:1: is etcd running, and listening on that port?"`
	seen := 0
	timeout := time.After(safety)
	var log []string
	for seen < 2 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("etcdlead ended; stderr:\n%s", strings.Join(log, "\n"))
			}
			log = append(log, l)
			if strings.Contains(l, "[WARN]  etcdlead: "+want) {
				seen++
			}
		case <-timeout:
			t.Fatalf("no two refused campaigns logged within %s; stderr:\n%s", safety, strings.Join(log, "\n"))
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stopped while retrying: %v, want exit 0", err)
	}
	for _, l := range log {
		if strings.Contains(l, "WARNING: DATA RACE") {
			t.Fatalf("the race detector found a data race:\n%s", strings.Join(log, "\n"))
		}
	}
}
