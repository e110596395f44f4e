package e2e

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/testsupport/testcert"
)

// blackhole accepts TCP connections and never reads or answers.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// An endpoint that accepts TCP but never answers is an unreachable etcd, in
// plain text and over TLS (where the handshake never ends): retried, each
// attempt bounded by --dial-timeout, until --wait ends; then 125.
func TestUnreachableRetriedUntilWaitEnds(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // it mostly waits: for a lease to end, a freeze, a --wait
	const dial, wait = 500 * time.Millisecond, 2500 * time.Millisecond
	ca := testcert.NewAuthority(t, "ca").WriteCA(t, t.TempDir(), "ca.pem")
	bh := blackhole(t)
	for _, endpoint := range [][]string{{"--endpoints=" + bh}, {"--endpoints=https://" + bh, "--cacert=" + ca}} {
		args := append([]string{"run", "--election=bh", "--ttl=2s", "--log-level=debug",
			"--dial-timeout=" + dial.String(), "--wait=" + wait.String()}, endpoint...)
		o := runEtcdlead(t, nil, append(args, "--", "true")...)
		t.Logf("%v: exit %d after %v: %s", endpoint, o.code, o.took.Round(time.Millisecond), lastLine(o.stderr))
		if o.code != 125 || !strings.Contains(lastLine(o.stderr), fmt.Sprintf("unreachable for --wait %s", wait)) {
			t.Errorf("%v: exit %d, want 125 and 'unreachable for --wait'\n%s", endpoint, o.code, o.stderr)
		}
		if o.took < wait {
			t.Errorf("%v: gave up after %v, before --wait %s ended: a request's own timeout (--dial-timeout %s) was taken for the end of --wait",
				endpoint, o.took, wait, dial)
		}
		// How soon after the wait it ends is a timing figure; what decides
		// it is that no backoff runs past the wait's end.
		for _, m := range regexp.MustCompile(`backing off: delay=(\S+) wait_left=(\S+)`).FindAllStringSubmatch(o.stderr, -1) {
			d, err1 := time.ParseDuration(m[1])
			left, err2 := time.ParseDuration(m[2])
			if err1 != nil || err2 != nil || d > left {
				t.Errorf("%v: backed off %s with %s of --wait %s left", endpoint, m[1], m[2], wait)
			}
		}
		if !strings.Contains(o.stderr, "wait_left=") {
			t.Errorf("%v: no backoff logged with the wait left:\n%s", endpoint, o.stderr)
		}
	}
}

// Without --wait, etcdlead keeps trying a silent endpoint, one bounded
// attempt after another, and a stop signal ends it at once.
func TestUnreachableAttemptsAreBounded(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	const dial = 500 * time.Millisecond
	e := newEnv(t, []string{blackhole(t)})
	c := e.start("silent", []string{"--ttl=2s", "--dial-timeout=" + dial.String()}, []string{"true"})
	_, i := c.log.waitFor(t, "silent", "campaign failed", 0)
	c.log.waitFor(t, "silent", "campaign failed", i+1)
	lines := c.log.matching("")
	attempts := c.log.matching("campaign failed")
	// The first attempt ends one --dial-timeout after the start, give or
	// take scheduling; the second after a backoff and one more.
	if d := attempts[0].at.Sub(lines[0].at); d > dial+time.Second {
		t.Errorf("first attempt took %v, more than --dial-timeout %s", d, dial)
	}
	c.signal(t, syscall.SIGTERM)
	if code := c.exit(t); code != 0 {
		t.Errorf("stop while retrying: exit %d, want 0", code)
	}
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return ls[len(ls)-1]
}
