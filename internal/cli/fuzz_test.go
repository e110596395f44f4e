package cli

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
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/etcdconn"
	"github.com/etcdlead/etcdlead/internal/exitcode"
)

// parseRunArgs parses `etcdlead run ARGS -- true` with the real flags and
// the real validation, and stops before any etcd or process is touched.
func parseRunArgs(args []string) (runConfig, error) { return parseArgs(nil, args) }

// parseArgs is parseRunArgs with global given before the subcommand.
func parseArgs(global, args []string) (runConfig, error) {
	raw := append(append(append(append([]string{"etcdlead"}, global...), "run"), args...), "--", "true")
	var rc runConfig
	app := &cli.App{
		Name:           "etcdlead",
		Flags:          named(connectionFlags()),
		Writer:         io.Discard,
		ErrWriter:      io.Discard,
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   usageError,
		Commands: []*cli.Command{{
			Name: "run", Flags: named(runFlags()), OnUsageError: usageError,
			Action: func(c *cli.Context) (err error) {
				rc, err = parseRunConfig(c, raw)
				return err
			},
		}},
	}
	detachEnv(app) // variables are read as Main reads them (options.go)
	return rc, app.RunContext(context.Background(), raw)
}

// FuzzRunFlags feeds arbitrary values to the flags whose validation guards
// the promise (the TTL, the kill timeout, fence margin and renewal interval
// that must fit in it, --wait, --dial-timeout) and to the endpoints, the election name, the
// prefix and the id, which end up in etcd keys and values. An empty value
// leaves the flag out. Whatever the input: no panic; a refusal is one line;
// an acceptance satisfies every rule of docs/design.md. The seed corpus is
// in testdata/fuzz/FuzzRunFlags.
func FuzzRunFlags(f *testing.F) {
	f.Fuzz(func(t *testing.T, ttl, kill, margin, wait, dial, endpoints, election, prefix, id, renew string) {
		var args []string
		for _, fl := range []struct{ name, val string }{
			{flagTTL, ttl}, {flagKillTimeout, kill}, {flagFenceMargin, margin}, {flagWait, wait},
			{flagDialTimeout, dial}, {flagEndpoints, endpoints}, {flagElection, election},
			{flagPrefix, prefix}, {flagID, id}, {flagRenew, renew},
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
			if code := exitCode(err); code != exitcode.Failure {
				t.Fatalf("%q: exit code %d for bad flags, want %d", args, code, exitcode.Failure)
			}
			return
		}
		checkAccepted(t, args, rc)
	})
}

// checkLayout holds an accepted layout to what the barrier needs: each key
// of a term is valid in its own place only, and the resign key and the two
// prefixes never overlap (docs/design.md, "Keys").
func checkLayout(t *testing.T, args []string, l campaign.Layout) {
	t.Helper()
	if strings.Contains(strings.TrimPrefix(l.QueuePrefix(), "/"), "//") {
		t.Fatalf("%q: accepted a prefix with an empty segment: %q", args, l.QueuePrefix())
	}
	const lease = 0x694d8f1c2a3b9e05
	q := &mvccpb.KeyValue{Key: []byte(l.QueueKey(lease)), Lease: lease}
	s := &mvccpb.KeyValue{Key: []byte(l.SentinelKey(lease)), Lease: lease}
	if !l.ValidQueueKey(q) || l.ValidSentinel(q) || !l.ValidSentinel(s) || l.ValidQueueKey(s) {
		t.Fatalf("%q: keys %q and %q are not each valid in their own place only", args, q.Key, s.Key)
	}
	for _, p := range []string{l.QueuePrefix(), l.SentinelPrefix()} {
		if strings.HasPrefix(l.ResignKey(), p) {
			t.Fatalf("%q: resign key %q lies under %q", args, l.ResignKey(), p)
		}
	}
	if strings.HasPrefix(l.QueuePrefix(), l.SentinelPrefix()) || strings.HasPrefix(l.SentinelPrefix(), l.QueuePrefix()) {
		t.Fatalf("%q: prefixes %q and %q overlap", args, l.QueuePrefix(), l.SentinelPrefix())
	}
}

func checkAccepted(t *testing.T, args []string, rc runConfig) {
	t.Helper()
	tm := rc.timing()
	r := tm.RenewInterval
	switch {
	case r < campaign.MinRenewInterval:
		t.Fatalf("%q: accepted renewal interval %s", args, r)
	case tm.TTL < campaign.MinTTL || tm.TTL > campaign.MaxTTL || tm.TTL%time.Second != 0:
		t.Fatalf("%q: accepted TTL %s", args, tm.TTL)
	case tm.KillTimeout <= 0 || tm.FenceMargin <= 0:
		t.Fatalf("%q: accepted kill timeout %s, fence margin %s", args, tm.KillTimeout, tm.FenceMargin)
	case 3*(tm.KillTimeout+tm.FenceMargin+r) > 2*tm.TTL:
		t.Fatalf("%q: accepted K %s + m %s + r %s > 2/3 of T %s", args, tm.KillTimeout, tm.FenceMargin, r, tm.TTL)
	case rc.run.Wait < 0 || rc.conn.DialTimeout <= 0:
		t.Fatalf("%q: accepted --wait %s, --dial-timeout %s", args, rc.run.Wait, rc.conn.DialTimeout)
	}
	if rc.election() == "" || strings.ContainsRune(rc.election(), '/') || strings.IndexFunc(rc.election(), func(c rune) bool {
		return unicode.IsSpace(c) || !strconv.IsPrint(c)
	}) >= 0 {
		t.Fatalf("%q: accepted election %q", args, rc.election())
	}
	checkLayout(t, args, rc.run.Campaign.Layout)
	if len(rc.run.Campaign.ID) > campaign.MaxIDLen || strings.IndexFunc(rc.run.Campaign.ID, func(c rune) bool { return !unicode.IsPrint(c) }) >= 0 {
		t.Fatalf("%q: accepted id %q", args, rc.run.Campaign.ID)
	}
	if len(rc.conn.Endpoints) == 0 {
		t.Fatalf("%q: no endpoints accepted", args)
	}
	for _, e := range rc.conn.Endpoints {
		hostport := e
		if strings.Contains(e, "://") {
			u, err := url.Parse(e)
			if err != nil {
				t.Fatalf("%q: accepted endpoint %q: %v", args, e, err)
			}
			if pw, ok := u.User.Password(); ok {
				// Left to the client, which must refuse it without
				// showing the password.
				err := etcdconn.CheckEndpoints(rc.conn.Endpoints)
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
