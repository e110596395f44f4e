package e2e

import (
	"strings"
	"testing"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// A plain-text endpoint against etcd's https listener: run (without --wait,
// which would retry an outage for ever) and status end at once with 125
// and one line that names TLS and the fix, as https:// against a
// plain-text etcd does (testdata/script/unreached.txtar).
func TestPlainEndpointAgainstTLS(t *testing.T) {
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
