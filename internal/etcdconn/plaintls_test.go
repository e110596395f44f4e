package etcdconn

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
	"github.com/etcdlead/etcdlead/internal/testsupport/testcert"
)

// A plain-text endpoint against etcd's https listener is refused for good,
// with one line that names TLS and the fix, as its reverse is (tls.go):
// gRPC would otherwise redial it for ever, each time reading no answer.
// The request's own bound is the safety bound, far beyond the dial
// timeout, so an error that comes back is the refusal, not the deadline.
func TestPlainEndpointAgainstTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewAuthority(t, "etcdlead test CA")
	cert, key := ca.Issue(t, dir, "server", testcert.Options{CommonName: "etcd", Server: true})
	_, ep := etcdtest.StartTLS(t, etcdtest.Options{}, etcdtest.TLS{CertFile: cert, KeyFile: key})
	hostport := strings.TrimPrefix(ep, "https://")
	for _, endpoint := range []string{"http://" + hostport, hostport} {
		t.Run(strings.ReplaceAll(endpoint, "/", "_"), func(t *testing.T) {
			cli := newClient(t, Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second})
			for _, req := range []struct {
				name string
				do   func() error
			}{
				{"grant", func() error { _, err := cli.Grant(ctxT(t), 5); return err }},
				{"get", func() error { _, err := cli.Get(ctxT(t), "x"); return err }},
			} {
				err := req.do()
				var r *refusal
				switch {
				case err == nil:
					t.Fatalf("%s: answered in plain text by a TLS listener", req.name)
				case !errors.As(err, &r) || !campaign.Permanent(err):
					t.Fatalf("%s: %v, want a refusal that is not retried", req.name, err)
				}
				for _, want := range []string{"etcd at " + hostport + " speaks TLS", "use https://" + hostport, "--cacert"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: refusal %q does not say %q", req.name, err, want)
					}
				}
			}
		})
	}
}
