package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// stopWatch ends a status --watch with SIGTERM, which it answers with 0.
func stopWatch(t *testing.T, w *candidate) {
	t.Helper()
	w.stop(t)
	if code := w.exit(t); code != 0 {
		t.Fatalf("status --watch exit %d after SIGTERM, want 0", code)
	}
}

// watchStatus starts `etcdlead status --watch` on election with this env's
// endpoints and prefix; out holds its stdout, log its stderr.
func (e *env) watchStatus(election string, extraEnv []string, flags ...string) *candidate {
	e.t.Helper()
	args := append([]string{"status", "--endpoints=" + strings.Join(e.endpoints, ","), "--prefix=" + e.prefix,
		"--election=" + election, "--watch"}, flags...)
	cmd := exec.Command(etcdleadBin(), args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	return e.launch("watch", cmd)
}

// watchLine is one line of `status --watch --json`: docs/operating.md's schema,
// written out here so that a renamed field fails the test.
type watchLine struct {
	electionJSON
	Time     string `json:"time"`
	Revision int64  `json:"revision"`
}

// nextState reads the stream's JSON lines from index from until one
// satisfies ok, and returns it with the index after it. Each line must
// have exactly the schema's fields.
func nextState(t *testing.T, w *candidate, from int, what string, ok func(watchLine) bool) (watchLine, int) {
	t.Helper()
	for {
		line, i := w.out.waitFor(t, "status --watch ("+what+")", "", from)
		from = i + 1
		checkWatchSchema(t, line)
		var s watchLine
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i, err, line)
		}
		if ok(s) {
			return s, from
		}
	}
}

// checkWatchSchema fails unless line has every field of `status --json`'s
// election object (less the leader's TTL, which only a poll would keep
// current) plus time and revision, and no other.
func checkWatchSchema(t *testing.T, line string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, line)
	}
	want := []string{"election", "prefix", "leader", "waiting", "skipped_keys", "older_terms", "time", "revision"}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("fields %v, want %v:\n%s", got, want, line)
	}
	var cands []map[string]json.RawMessage
	if string(m["leader"]) != "null" {
		var l map[string]json.RawMessage
		if err := json.Unmarshal(m["leader"], &l); err != nil {
			t.Fatalf("leader: %v\n%s", err, line)
		}
		cands = append(cands, l)
	}
	var waiting []map[string]json.RawMessage
	if err := json.Unmarshal(m["waiting"], &waiting); err != nil || waiting == nil {
		t.Fatalf("waiting is not a list (%v):\n%s", err, line)
	}
	for _, c := range append(cands, waiting...) {
		// Every candidate here is an etcdlead of this version: its term
		// recorded its containment.
		if got := slices.Sorted(maps.Keys(c)); !slices.Equal(got, []string{"containment", "id", "key", "lease", "rev"}) {
			t.Fatalf("candidate fields %v, want containment, id, key, lease, rev:\n%s", got, line)
		}
	}
	var s watchLine
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339Nano, s.Time); err != nil || s.Revision <= 0 {
		t.Fatalf("time %q (%v), revision %d:\n%s", s.Time, err, s.Revision, line)
	}
}

// The JSON stream follows real candidates: a leader arrives, another
// queues, the leader leaves and the next leads; etcd compacts its history
// on the way. Every line has the schema; no line repeats the state before
// it; SIGTERM ends the stream with 0.
func TestStatusWatchJSON(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	w := e.watchStatus("probe", nil, "--json")
	s, at := nextState(t, w, 0, "no leader", func(s watchLine) bool { return true })
	if s.Leader != nil || len(s.Waiting) != 0 || s.Election != "probe" || s.Prefix != e.prefix+"probe" {
		t.Fatalf("first state %+v, want election probe without candidates", s)
	}
	c1 := e.start("c1", fast, e.probe())
	c1.out.waitFor(t, "c1", "ready", 0)
	s, at = nextState(t, w, at, "c1 leads", func(s watchLine) bool { return s.Leader != nil && s.Leader.ID == "c1" })
	if s.Leader.Key != e.prefix+"probe/"+s.Leader.Lease || s.Leader.Rev <= 0 || s.Leader.TTL != nil {
		t.Fatalf("leader %+v, want c1's key, its lease, a revision and no TTL", *s.Leader)
	}
	c2 := e.start("c2", fast, e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	s, at = nextState(t, w, at, "c2 queues", func(s watchLine) bool { return len(s.Waiting) == 1 })
	if s.Leader == nil || s.Leader.ID != "c1" || s.Waiting[0].ID != "c2" {
		t.Fatalf("state %+v, want c1 leading and c2 waiting", s)
	}

	// Compact past every revision the watch has seen: it must go on.
	c := cluster.Client(t)
	resp, err := c.Get(ctxT(t), "compaction")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctxT(t), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	c1.stop(t)
	c1.exit(t)
	s, at = nextState(t, w, at, "c2 leads", func(s watchLine) bool {
		return s.Leader != nil && s.Leader.ID == "c2" && len(s.Waiting) == 0 && s.Older == 0
	})
	c2.out.waitFor(t, "c2", "ready", 0)

	stopWatch(t, w)
	// Every line is a change: none repeats the one before it.
	all, _, _ := w.out.snapshot()
	var prev electionJSON
	for i, line := range all {
		checkWatchSchema(t, line)
		var s watchLine
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatal(err)
		}
		if i > 0 && sameState(prev, s.electionJSON) {
			t.Errorf("line %d repeats the state before it:\n%s", i, strings.Join(all, "\n"))
		}
		prev = s.electionJSON
	}
	if at != len(all) {
		t.Errorf("%d lines after c2 led, want none:\n%s", len(all)-at, strings.Join(all, "\n"))
	}
}

func sameState(a, b electionJSON) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// joinElection puts a term's queue key and sentinel as a candidate does
// (campaign/keys.go), attached to a new lease, for a stream to follow
// without a candidate process.
func joinElection(t *testing.T, c *clientv3.Client, l campaign.Layout, id string) clientv3.LeaseID {
	t.Helper()
	lease, err := c.Grant(ctxT(t), 600)
	if err != nil {
		t.Fatal(err)
	}
	q := l.QueueKey(lease.ID)
	if _, err := c.Txn(ctxT(t)).Then(clientv3.OpPut(l.SentinelKey(lease.ID), q, clientv3.WithLease(lease.ID)),
		clientv3.OpPut(q, id, clientv3.WithLease(lease.ID))).Commit(); err != nil {
		t.Fatal(err)
	}
	return lease.ID
}

// The text stream goes on through an etcd restart: one line on stderr
// while etcd is away, the state again once it is back, and the changes
// after. A leader whose predecessor's lease still lives is shown waiting
// for it. SIGINT ends the stream with 0.
func TestStatusWatchThroughRestart(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c := cluster.Client(t)
	l, err := campaign.NewLayout(e.prefix, "web")
	if err != nil {
		t.Fatal(err)
	}
	w := e.watchStatus("web", nil)
	w.out.waitFor(t, "watch", "state=no-leader waiting=0", 0)
	w1 := joinElection(t, c, l, "w 1") // a space: the id is quoted
	line, at := w.out.waitFor(t, "watch", `state=leading leader="w 1" lease=`, 1)
	if at != 1 || !strings.HasSuffix(line, " waiting=0") {
		t.Fatalf("line %d %q, want line 1 with w 1 leading alone", at, line)
	}

	cluster.Member(0).Stop(t)
	w.log.waitFor(t, "watch", "etcdlead: status: etcd unreachable", 0)
	cluster.Member(0).Restart(t)
	// The state is printed again after the outage, though it is the same.
	line, at = w.out.waitFor(t, "watch", "state=", at+1)
	if !strings.Contains(line, `state=leading leader="w 1" `) {
		t.Fatalf("after the restart: %q, want w 1 leading", line)
	}
	if n := w.log.count("etcd unreachable"); n != 1 {
		t.Errorf("%d lines say etcd is unreachable, want 1:\n%s", n, w.log)
	}

	joinElection(t, c, l, "w2")
	line, at = w.out.waitFor(t, "watch", "state=", at+1)
	if !strings.Contains(line, `state=leading leader="w 1" `) || !strings.HasSuffix(line, " waiting=1") {
		t.Fatalf("after w2 joined: %q, want w 1 leading and one waiting", line)
	}
	// w 1's queue key goes by hand; its lease and sentinel stay, so w2
	// heads the queue but waits for them.
	if _, err := c.Delete(ctxT(t), l.QueueKey(w1)); err != nil {
		t.Fatal(err)
	}
	line, at = w.out.waitFor(t, "watch", "state=", at+1)
	if !strings.Contains(line, "state=waiting-older leader=w2 ") || !strings.HasSuffix(line, " waiting=0 older_terms=1") {
		t.Fatalf("after w 1's key went: %q, want w2 waiting for the older term", line)
	}
	if _, err := c.Revoke(ctxT(t), w1); err != nil {
		t.Fatal(err)
	}
	line, at = w.out.waitFor(t, "watch", "state=", at+1)
	if !strings.Contains(line, "state=leading leader=w2 ") || !strings.HasSuffix(line, " waiting=0") {
		t.Fatalf("after w 1's lease went: %q, want w2 leading", line)
	}

	w.signal(t, syscall.SIGINT)
	if code := w.exit(t); code != 0 {
		t.Fatalf("status --watch exit %d after SIGINT, want 0", code)
	}
	if all, _, _ := w.out.snapshot(); len(all) != at+1 {
		t.Errorf("lines after the last change:\n%s", strings.Join(all, "\n"))
	}
}

// A refusal ends the stream at once with 125 and the line every command
// prints; a user whose role covers just the election's two prefixes
// (docs/security.md) may follow it.
func TestStatusWatchRefusals(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	cluster, _ := startAuthEtcd(t)
	ep := "--endpoints=" + cluster.Endpoints()[0]
	watch := func(extraEnv []string, flags ...string) outcome {
		return runEtcdlead(t, extraEnv, append([]string{"status", ep, "--election=reports", "--watch"}, flags...)...)
	}
	// The same line as status without --watch.
	same := func(extraEnv []string, flags []string, wants ...string) {
		t.Helper()
		line := watch(extraEnv, flags...).failure(t, 125, wants...)
		once := runEtcdlead(t, extraEnv, append([]string{"status", ep, "--election=reports"}, flags...)...).failure(t, 125, wants...)
		if line != once {
			t.Errorf("status --watch says %q, status %q", line, once)
		}
	}
	same([]string{"ETCDLEAD_PASSWORD=wrong-" + alicePassword}, []string{"--user=alice"},
		`etcd refused user "alice"`, "check --user and the password")
	same([]string{"ETCDLEAD_PASSWORD=" + alicePassword}, []string{"--user=alice", "--election=other"},
		"permission denied", `may not use key "etcdlead/other/`)

	e := newEnv(t, cluster.Endpoints())
	e.prefix = "etcdlead/"
	w := e.watchStatus("reports", []string{"ETCDLEAD_PASSWORD=" + alicePassword}, "--user=alice")
	w.out.waitFor(t, "watch", "state=no-leader waiting=0", 0)
	stopWatch(t, w)
}

// A member cut off from its quorum keeps its connections open but has no
// raft leader: the stream must say etcd does not answer, not go silent,
// and go on once the quorum is back.
func TestStatusWatchNoQuorum(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	cluster := etcdtest.Start(t, etcdtest.Options{Members: 3})
	ms := cluster.Members()
	e := newEnv(t, []string{ms[0].ClientAddr()})
	w := e.watchStatus("web", nil)
	w.out.waitFor(t, "watch", "state=no-leader waiting=0", 0)
	ms[1].Stop(t)
	ms[2].Stop(t)
	w.log.waitFor(t, "watch", "etcdlead: status: etcd unreachable", 0)
	ms[1].Restart(t)
	if line, i := w.out.waitFor(t, "watch", "state=", 1); i != 1 || !strings.Contains(line, "state=no-leader waiting=0") {
		t.Fatalf("line %d %q, want the state again once the quorum is back", i, line)
	}
	l, err := campaign.NewLayout(e.prefix, "web")
	if err != nil {
		t.Fatal(err)
	}
	joinElection(t, etcdtest.NewClient(t, ms[0].ClientAddr()), l, "w1")
	w.out.waitFor(t, "watch", "state=leading leader=w1 ", 2)
	stopWatch(t, w)
}

// A reader that stops reading (`| head -1`) ends the stream at the next
// change, quietly and with 0.
func TestStatusWatchReaderGone(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	l, err := campaign.NewLayout(e.prefix, "web")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(etcdleadBin(), "status", "--endpoints="+cluster.Endpoints()[0], "--prefix="+e.prefix, "--election=web", "--watch")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := newLines(out)
	first.waitFor(t, "watch", "state=no-leader", 0)
	out.Close()
	joinElection(t, cluster.Client(t), l, "w1")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || stderr.Len() != 0 {
			t.Fatalf("status --watch ended with %v, stderr %q; want 0 and nothing said", err, stderr.String())
		}
	case <-time.After(safety):
		_ = cmd.Process.Kill()
		t.Fatalf("status --watch still runs %s after its reader went", safety)
	}
}

// The upstream example of docs/operating.md, up to its jq filter, run as
// written on the stream: each leader's id that has the shape of host:port comes out
// as one line, and a forged id with a newline in it does not.
func TestStatusWatchReadmeExample(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq is missing (apt-get install jq): docs/operating.md's example is not run")
	}
	pipeline := docWatchPipeline(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c := cluster.Client(t)
	l, err := campaign.NewLayout(e.prefix, "api")
	if err != nil {
		t.Fatal(err)
	}
	// A forged id leads when the pipeline starts, and the test sees jq
	// given that state before it moves on.
	forged := joinElection(t, c, l, "web-9:80\n")
	w1 := joinElection(t, c, l, "web-1:8080")
	etcdlead, jq, _ := strings.Cut(pipeline, " | ")
	cmd := exec.Command("sh", "-c", etcdlead+" | tee /dev/stderr | "+jq)
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"),
		"ETCDLEAD_ENDPOINTS="+cluster.Endpoints()[0], "ETCDLEAD_PREFIX="+e.prefix)
	// Its own group, so that the shell, etcdlead, tee and jq end together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	upstreams, given := newLines(out), newLines(errs)
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("pipeline %q; jq was given:\n%s", pipeline, given)
		}
	})
	given.waitFor(t, "pipeline", `"id":"web-9:80\n"`, 0)
	if _, err := c.Revoke(ctxT(t), forged); err != nil {
		t.Fatal(err)
	}
	upstreams.waitFor(t, "pipeline", "web-1:8080", 0)
	joinElection(t, c, l, "web-2:8080")
	if _, err := c.Revoke(ctxT(t), w1); err != nil {
		t.Fatal(err)
	}
	upstreams.waitFor(t, "pipeline", "web-2:8080", 1)
	// A queue change repeats the leader's line, which the example's loop
	// skips; the forged id never comes out.
	if all, _, _ := upstreams.snapshot(); !slices.Equal(slices.Compact(all), []string{"web-1:8080", "web-2:8080"}) {
		t.Fatalf("upstreams %q, want web-1:8080 then web-2:8080", all)
	}
}

// docWatchPipeline is the example of docs/operating.md, "Following the
// leader", up to and including its jq filter, without the trailing pipe.
func docWatchPipeline(t *testing.T) string {
	t.Helper()
	const heading = "### Following the leader: `status --watch`"
	_, rest, ok := strings.Cut(docSection(t, "docs/operating.md", heading), "```sh\n")
	var cmd []string
	for _, line := range strings.Split(rest, "\n") {
		if !ok {
			break
		}
		cmd = append(cmd, strings.TrimSuffix(strings.TrimSpace(line), " |"))
		if strings.HasPrefix(strings.TrimSpace(line), "jq ") {
			return strings.Join(cmd, " | ")
		}
	}
	t.Fatalf("docs/operating.md has no example of status --watch piped into jq under %q", heading)
	return ""
}

// A certificate etcd's does not verify against is a refusal too: 125 at
// once, with status's line.
func TestStatusWatchTLSRefusal(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	p := newPKI(t)
	_, ep := etcdtest.StartTLS(t, etcdtest.Options{}, etcdtest.TLS{CertFile: p.server, KeyFile: p.serverKey})
	args := []string{"status", "--endpoints=" + ep, "--cacert=" + p.otherCA, "--election=tls"}
	wants := []string{"not signed by the CA in --cacert " + p.otherCA, "give --cacert the CA that signed etcd's certificate"}
	line := runEtcdlead(t, nil, append(args, "--watch")...).failure(t, 125, wants...)
	if once := runEtcdlead(t, nil, args...).failure(t, 125, wants...); line != once {
		t.Errorf("status --watch says %q, status %q", line, once)
	}
}

// Started while etcd is down, the stream says so once (a JSON record with
// --log-format json, as every stderr line then is) and prints the first
// state when etcd comes.
func TestStatusWatchStartsWithoutEtcd(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cluster.Member(0).Stop(t)
	e := newEnv(t, cluster.Endpoints())
	w := e.watchStatus("web", nil, "--json", "--log-format=json", "--dial-timeout=1s")
	line, _ := w.log.waitFor(t, "watch", "etcd unreachable", 0)
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil || !strings.Contains(fmt.Sprint(rec["@message"]), "status: etcd unreachable") {
		t.Fatalf("stderr %q is not a JSON record saying etcd is unreachable (%v)", line, err)
	}
	if all, _, _ := w.out.snapshot(); len(all) != 0 {
		t.Fatalf("stdout before etcd answered: %q", all)
	}
	cluster.Member(0).Restart(t)
	nextState(t, w, 0, "first state", func(s watchLine) bool { return s.Leader == nil && s.Election == "web" })
	if n := w.log.count("etcd unreachable"); n != 1 {
		t.Errorf("%d lines say etcd is unreachable, want 1:\n%s", n, w.log)
	}
	stopWatch(t, w)
}
