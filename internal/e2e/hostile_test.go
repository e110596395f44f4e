package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// Hostile and wrong input: each case is one line naming the problem and the
// fix, the documented exit code, and nothing left in etcd. The cases run one
// after another on an etcd of their own, so "nothing left" means no key and
// no lease at all. testdata/script/badinput.txtar and command.txtar check
// more wording; this adds the exit code, the single line and etcd.
func TestHostileInputLeavesNothing(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	real := "--endpoints=" + cluster.Endpoints()[0]
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string // after "run"; the real endpoint is added unless an --endpoints is given
		code  int
		wants []string
	}{
		{[]string{"--endpoints=", "--", "true"}, 125, []string{"--endpoints is empty", "give host:port", "leave --endpoints out"}},
		{[]string{"--endpoints=127.0.0.1:2379,", "--", "true"}, 125, []string{"has an empty entry"}},
		{[]string{"--endpoints=localhost", "--", "true"}, 125, []string{`"localhost" is not host:port`, "use e.g. 127.0.0.1:2379"}},
		{[]string{"--endpoints=:2379", "--", "true"}, 125, []string{"is not host:port"}},
		{[]string{"--endpoints=127.0.0.1:99999", "--", "true"}, 125, []string{"has no valid port"}},
		{[]string{"--endpoints=127.0.0.1:2379 junk", "--", "true"}, 125, []string{"has no valid port"}},
		{[]string{"--endpoints=ftp://a:1", "--", "true"}, 125, []string{"is not an endpoint", "use host:port, http://host:port or https://host:port"}},
		{[]string{"--endpoints=http://", "--", "true"}, 125, []string{"is not an endpoint"}},
		{[]string{"--endpoints=http://127.0.0.1:2379/v3", "--", "true"}, 125, []string{"is not an endpoint"}},
		{[]string{"--endpoints=http://alice:s3cret@" + cluster.Endpoints()[0], "--", "true"}, 125, []string{
			"endpoint http://alice:xxxxx@" + cluster.Endpoints()[0] + " holds credentials", "give --user and --password-file"}},
		{[]string{"--election=a/b", "--", "true"}, 125, []string{`--election "a/b" may not contain '/' or spaces`, "use e.g. --election a-b"}},
		{[]string{"--election=a b", "--", "true"}, 125, []string{"may not contain '/' or spaces", "--election a-b"}},
		{[]string{"--election=a\tb", "--", "true"}, 125, []string{"may not contain '/' or spaces"}},
		{[]string{"--election=a\x01b", "--", "true"}, 125, []string{"unprintable characters", "use letters, digits"}},
		{[]string{"--election=x.lease", "--", "true"}, 125, []string{`--election "x.lease" ends in ".lease", which etcdlead reserves`, "use e.g. --election x-lease"}},
		{[]string{"--election=x.resign", "--", "true"}, 125, []string{`ends in ".resign"`, "--election x-resign"}},
		{[]string{"--prefix=", "--", "true"}, 125, []string{"--prefix is empty", "give a key prefix", "leave --prefix out to use etcdlead/"}},
		{[]string{"--prefix=a//b", "--", "true"}, 125, []string{`--prefix "a//b/" has an empty segment`}},
		{[]string{"--prefix=a b/", "--", "true"}, 125, []string{"has whitespace or unprintable characters"}},
		{[]string{"--prefix=a\nb/", "--", "true"}, 125, []string{"has whitespace or unprintable characters"}},
		{[]string{"--id=a\nMAINPID=1", "--", "true"}, 125, []string{`--id "a\nMAINPID=1" has unprintable characters`}},
		{[]string{"--id=" + strings.Repeat("x", 70000), "--", "true"}, 125, []string{"--id is 70000 bytes long: use at most 256"}},
		{[]string{"--ttl=0s", "--", "true"}, 125, []string{"--ttl 0s is out of range", "from 2s to 1h0m0s"}},
		{[]string{"--ttl=1s", "--", "true"}, 125, []string{"--ttl 1s is out of range"}},
		{[]string{"--ttl=1500ms", "--", "true"}, 125, []string{"--ttl 1.5s is out of range"}},
		{[]string{"--ttl=2500ms", "--", "true"}, 125, []string{"not a whole number of seconds", "use e.g. --ttl 3s"}},
		{[]string{"--ttl=2h", "--", "true"}, 125, []string{"--ttl 2h0m0s is out of range"}},
		{[]string{"--ttl=100000h", "--", "true"}, 125, []string{"--ttl 100000h0m0s is out of range"}},
		{[]string{"--ttl=-3s", "--", "true"}, 125, []string{"out of range"}},
		{[]string{"--ttl=15x", "--", "true"}, 125, []string{`--ttl "15x" is not a duration`, "or 15 for seconds"}},
		{[]string{"--ttl=2s", "--kill-timeout=5s", "--", "true"}, 125, []string{"exceeds 2/3 of --ttl 2s", "use --ttl 10s or shorter timeouts"}},
		{[]string{"--ttl=15s", "--kill-timeout=10s", "--", "true"}, 125, []string{"exceeds 2/3 of --ttl 15s", "use --ttl 18s"}},
		{[]string{"--kill-timeout=0s", "--", "true"}, 125, []string{"--kill-timeout 0s must be positive"}},
		{[]string{"--ttl=2s", "--fence-margin=2s", "--", "true"}, 125, []string{"exceeds 2/3 of --ttl 2s"}},
		{[]string{"--wait=-1s", "--", "true"}, 125, []string{"--wait -1s must not be negative"}},
		{[]string{"--dial-timeout=0s", "--", "true"}, 125, []string{"--dial-timeout 0s must be positive"}},
		{[]string{"--conflict-exit-code=256", "--", "true"}, 125, []string{"is not an exit code: use 0 to 255"}},
		{[]string{"--kill-signal=SIGNOPE", "--", "true"}, 125, []string{"is not a signal"}},
		{[]string{"true"}, 125, []string{"missing -- before the command", "etcdlead run [options] -- true"}},
		{[]string{}, 125, []string{"no command given"}},
		{[]string{"--"}, 125, []string{"no command given after --"}},
		{[]string{"--", ""}, 125, []string{"no command given after --"}},
		{[]string{"--", filepath.Join(dir, "adir")}, 126, []string{"cannot execute " + filepath.Join(dir, "adir") + ": is a directory"}},
		{[]string{"--", "/"}, 126, []string{"cannot execute /: is a directory"}},
		{[]string{"--", filepath.Join(dir, "missing")}, 127, []string{"command not found"}},
		{[]string{"--cert=" + filepath.Join(dir, "c.pem"), "--", "true"}, 125, []string{"--cert and --key go together"}},
		{[]string{"--cacert=" + filepath.Join(dir, "none.pem"), "--", "true"}, 125, []string{"--cacert: " + filepath.Join(dir, "none.pem") + ": no such file or directory"}},
		{[]string{"--password-file=" + filepath.Join(dir, "pw"), "--", "true"}, 125, []string{"--password-file was given without a user"}},
		{[]string{"--user=alice", "--password-file=" + dir, "--", "true"}, 125, []string{"--password-file " + dir + " is not a regular file (a directory)"}},
	} {
		args := []string{"run", "--prefix=hostile/", "--election=hostile"}
		if !strings.Contains(strings.Join(tc.args, " "), "--endpoints") {
			args = append(args, real)
		}
		// A later --election wins over the default one above.
		o := runEtcdlead(t, nil, append(args, tc.args...)...)
		line := o.failure(t, tc.code, tc.wants...)
		if strings.Contains(o.stderr, "s3cret") {
			t.Errorf("the password in the endpoint was printed: %s", o.stderr)
		}
		t.Logf("%q: exit %d: %s", tc.args, o.code, line)
		nothingLeft(t, cli, "")
	}
}

// A huge argument list reaches the child whole.
func TestHugeArgumentList(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	args := []string{"run", "--endpoints=" + cluster.Endpoints()[0], "--election=huge", "--ttl=2s",
		"--", "sh", "-c", `echo "$# ${#1} ${100000}"`, "sh"}
	arg := strings.Repeat("x", 9)
	for i := 1; i <= 100000; i++ {
		args = append(args, arg+strconv.Itoa(i%10)) // 100000 arguments, about 1.1 MB
	}
	o := runEtcdlead(t, nil, args...)
	if o.code != 0 || o.stdout != "100000 10 xxxxxxxxx0\n" {
		t.Fatalf("exit %d, stdout %q\n%s", o.code, o.stdout, o.stderr)
	}
	nothingLeft(t, cluster.Client(t), "")
}

// Failures that come after etcdlead wrote to etcd (a lease granted, keys
// put): each still ends with nothing of its own left. Without these,
// "nothing left" above could not fail, as every case there is refused
// before etcd is touched.
func TestFailuresAfterWritingLeaveNothing(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	ep := "--endpoints=" + cluster.Endpoints()[0]
	// Found and executable, so accepted before campaigning; its
	// interpreter is missing, so exec fails only once it leads.
	script := filepath.Join(t.TempDir(), "job")
	if err := os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := runEtcdlead(t, nil, "run", ep, "--election=late", "--ttl=2s", "--", script)
	o.failure(t, 127, "no such file or directory")
	nothingLeft(t, cli, "")

	// A loser of --no-wait queued, saw the leader, and revoked.
	e := newEnv(t, cluster.Endpoints())
	c1 := e.start("c1", fast, e.probe())
	c1.out.waitFor(t, "c1", "ready", 0)
	if o := runEtcdlead(t, nil, "run", ep, "--prefix="+e.prefix, "--election=probe", "--no-wait", "--ttl=2s", "--", "true"); o.code != 75 {
		t.Errorf("--no-wait beside a leader: exit %d, want 75\n%s", o.code, o.stderr)
	}
	leases, err := cli.Leases(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 1 {
		t.Errorf("%d leases after the loser ended, want the leader's alone", len(leases.Leases))
	}
	stopAll(t, e, c1)
	nothingLeft(t, cli, "")
}
