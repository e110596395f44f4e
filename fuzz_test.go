package main

import (
	"context"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/etcdlead/etcdlead/campaign"
)

// parseRunArgs parses `etcdlead run ARGS -- true` with the real flags and
// the real validation, and stops before any etcd or process is touched.
func parseRunArgs(args []string) (runConfig, error) {
	raw := append(append([]string{"etcdlead", "run"}, args...), "--", "true")
	var rc runConfig
	app := &cli.App{
		Name:           "etcdlead",
		Flags:          connectionFlags(),
		Writer:         io.Discard,
		ErrWriter:      io.Discard,
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   usageError,
		Commands: []*cli.Command{{
			Name: "run", Flags: runFlags(), OnUsageError: usageError,
			Action: func(c *cli.Context) (err error) {
				rc, err = parseRunConfig(c, raw)
				return err
			},
		}},
	}
	return rc, app.RunContext(context.Background(), raw)
}

// FuzzRunFlags feeds arbitrary values to the flags whose validation guards
// the promise (the TTL, the kill timeout and fence margin that must fit in
// it, --wait, --dial-timeout) and to the endpoints and the election name,
// which end up in etcd keys. An empty value leaves the flag out. Whatever
// the input: no panic; a refusal is one line; an acceptance satisfies every
// rule of DESIGN.md. The seed corpus is in testdata/fuzz/FuzzRunFlags.
func FuzzRunFlags(f *testing.F) {
	f.Fuzz(func(t *testing.T, ttl, kill, margin, wait, dial, endpoints, election string) {
		var args []string
		for _, fl := range []struct{ name, val string }{
			{flagTTL, ttl}, {flagKillTimeout, kill}, {flagFenceMargin, margin}, {flagWait, wait},
			{flagDialTimeout, dial}, {flagEndpoints, endpoints}, {flagElection, election},
		} {
			if fl.val != "" {
				args = append(args, "--"+fl.name+"="+fl.val)
			}
		}
		rc, err := parseRunArgs(args)
		if err != nil {
			msg := errorMessage(err)
			if msg == "" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("%q: refusal is not one line: %q", args, msg)
			}
			if code := exitCode(err); code != exitFailure {
				t.Fatalf("%q: exit code %d for bad flags, want %d", args, code, exitFailure)
			}
			return
		}
		checkAccepted(t, args, rc)
	})
}

func checkAccepted(t *testing.T, args []string, rc runConfig) {
	t.Helper()
	tm := rc.timing
	r := campaign.RenewInterval(tm.TTL)
	switch {
	case tm.TTL < campaign.MinTTL || tm.TTL > campaign.MaxTTL || tm.TTL%time.Second != 0:
		t.Fatalf("%q: accepted TTL %s", args, tm.TTL)
	case tm.KillTimeout <= 0 || tm.FenceMargin <= 0:
		t.Fatalf("%q: accepted kill timeout %s, fence margin %s", args, tm.KillTimeout, tm.FenceMargin)
	case 3*(tm.KillTimeout+tm.FenceMargin+r) > 2*tm.TTL:
		t.Fatalf("%q: accepted K %s + m %s + r %s > 2/3 of T %s", args, tm.KillTimeout, tm.FenceMargin, r, tm.TTL)
	case rc.wait < 0 || rc.conn.dialTimeout <= 0:
		t.Fatalf("%q: accepted --wait %s, --dial-timeout %s", args, rc.wait, rc.conn.dialTimeout)
	}
	if rc.election == "" || strings.ContainsRune(rc.election, '/') || strings.IndexFunc(rc.election, func(c rune) bool {
		return unicode.IsSpace(c) || !strconv.IsPrint(c)
	}) >= 0 {
		t.Fatalf("%q: accepted election %q", args, rc.election)
	}
	if !strings.HasSuffix(rc.prefix, rc.election) {
		t.Fatalf("%q: election %q gives prefix %q", args, rc.election, rc.prefix)
	}
	if len(rc.conn.endpoints) == 0 {
		t.Fatalf("%q: no endpoints accepted", args)
	}
	for _, e := range rc.conn.endpoints {
		hostport := e
		if strings.Contains(e, "://") {
			u, err := url.Parse(e)
			if err != nil {
				t.Fatalf("%q: accepted endpoint %q: %v", args, e, err)
			}
			if pw, ok := u.User.Password(); ok {
				// Left to the client, which must refuse it without
				// showing the password.
				err := checkEndpoints(rc.conn.endpoints)
				if err == nil || (pw != "" && strings.Contains(err.Error(), pw)) {
					t.Fatalf("%q: endpoint %q with credentials: %v", args, e, err)
				}
			}
			hostport = u.Host
		}
		host, port, err := net.SplitHostPort(hostport)
		p, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
			t.Fatalf("%q: accepted endpoint %q", args, e)
		}
	}
}
