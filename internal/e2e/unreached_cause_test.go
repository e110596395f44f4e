package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An endpoint where a plain HTTP/1.1 server listens, not etcd (a wrong
// port): status, resign and run say so, and where, instead of "context
// deadline exceeded".
func TestWrongPortHTTPServerNamed(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not etcd", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	const cause = "the server answered in HTTP/1.1, not in etcd's gRPC: check the endpoint's port"
	for _, args := range [][]string{
		{"status", "--endpoints=" + addr, "--dial-timeout=1s"},
		{"resign", "--election=x", "--endpoints=" + addr, "--dial-timeout=1s"},
	} {
		line := runEtcdlead(t, nil, args...).failure(t, 125, "etcd at "+addr+" not reached within --dial-timeout 1s", cause)
		t.Logf("%s: %s", args[0], line)
	}
	o := runEtcdlead(t, nil, "run", "--no-wait", "--election=x", "--endpoints="+addr, "--dial-timeout=1s", "--", "true")
	if o.code != 125 || !strings.Contains(lastLine(o.stderr), cause) {
		t.Fatalf("run: exit %d, want 125 naming the cause:\n%s", o.code, o.stderr)
	}
}
