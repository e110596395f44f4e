package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlead/etcdlead/campaign"
	"github.com/etcdlead/etcdlead/internal/ops"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// etcdleadCmd runs an etcdlead command to its end with this env's endpoints
// and prefix and returns its stdout, stderr and exit code.
func (e *env) etcdleadCmd(args ...string) (string, string, int) {
	e.t.Helper()
	full := append([]string{args[0], "--endpoints=" + strings.Join(e.endpoints, ","), "--prefix=" + e.prefix}, args[1:]...)
	cmd := exec.Command(etcdleadBin(), full...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if strings.Contains(errb.String(), "WARNING: DATA RACE") {
		e.t.Errorf("etcdlead %v: the race detector found a data race:\n%s", args, errb.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// electionJSON and candidateJSON are the schema docs/operating.md
// documents for `status --json`, written out here rather than taken from
// the CLI, so a renamed field fails these tests.
type electionJSON struct {
	Election string          `json:"election"`
	Prefix   string          `json:"prefix"`
	Leader   *candidateJSON  `json:"leader"`
	Waiting  []candidateJSON `json:"waiting"`
	Skipped  int             `json:"skipped_keys"`
	Older    int             `json:"older_terms"`
}

type candidateJSON struct {
	ID    string `json:"id"`
	Key   string `json:"key"`
	Rev   int64  `json:"rev"`
	Lease string `json:"lease"`
	TTL   *int64 `json:"ttl_seconds,omitempty"`
	// Containment is what holds its child together (docs/operating.md, "Containment").
	Containment string `json:"containment,omitempty"`
}

func (e *env) status(t *testing.T, election string) electionJSON {
	t.Helper()
	out, errs, code := e.etcdleadCmd("status", "--election="+election, "--json")
	if code != 0 && code != 3 {
		t.Fatalf("status exit %d: %s", code, errs)
	}
	var el electionJSON
	if err := json.Unmarshal([]byte(out), &el); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if (el.Leader != nil) != (code == 0) {
		t.Fatalf("status exit %d does not match leader %+v", code, el.Leader)
	}
	return el
}

func ids(cs []candidateJSON) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// status shows the queue; resign makes the leader step down by itself and
// queue again at the back; --id guards against resigning the wrong one.
func TestStatusAndResign(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	var cs []*candidate
	for _, n := range []string{"c1", "c2", "c3"} {
		c := e.start(n, fast, e.probe())
		if n == "c1" {
			c.out.waitFor(t, n, "ready", 0)
		} else {
			c.log.waitFor(t, n, "waiting on predecessor", 0)
		}
		cs = append(cs, c)
	}
	el := e.status(t, "probe")
	if el.Leader == nil || el.Leader.ID != "c1" || strings.Join(ids(el.Waiting), ",") != "c2,c3" {
		t.Fatalf("status = %+v, want leader c1 then c2, c3", el)
	}
	if _, errs, code := e.etcdleadCmd("resign", "--election=probe", "--id=c2"); code != 3 || !strings.Contains(errs, "c2 does not lead") {
		t.Fatalf("resign --id c2: exit %d, %q; want 3 and a message", code, errs)
	}
	out, errs, code := e.etcdleadCmd("resign", "--election=probe", "--id=c1")
	if code != 0 || !strings.Contains(out, "c1 stepped down") {
		t.Fatalf("resign: exit %d, %q %q", code, out, errs)
	}
	cs[1].out.waitFor(t, "c2", "ready", 0)
	cs[0].stoppedBySupervisor(t)
	_, i := cs[0].log.waitFor(t, "c1", "resign requested", 0)
	cs[0].log.waitFor(t, "c1", "waiting on predecessor", i)
	el = e.status(t, "probe")
	if el.Leader == nil || el.Leader.ID != "c2" || strings.Join(ids(el.Waiting), ",") != "c3,c1" {
		t.Fatalf("after resign, status = %+v, want c2 leading, then c3, c1", el)
	}
	stopAll(t, e, cs...)
	// The log names each thing for what it was: the predecessor waited on
	// by its id, a resign as a step down on request rather than a loss,
	// and the end of a term that never led as a revoke.
	for n, want := range map[int]string{1: "id=c1", 2: "id=c2"} {
		if line, _ := cs[n].log.find("waiting on predecessor"); !strings.Contains(line, want) {
			t.Errorf("%s: %q does not name the predecessor (%s)", cs[n].name, line, want)
		}
	}
	if cs[0].log.count("[INFO]  etcdlead: stepped down on request; child stopping") != 1 || cs[0].log.count("leadership lost") != 0 {
		t.Errorf("c1's resign is not logged as a step down on request:\n%s", cs[0].log)
	}
	if cs[2].log.count("lease revoked") == 0 || cs[2].log.count("resigned") != 0 || cs[2].log.count("stepped down") != 0 {
		t.Errorf("c3 never led, and its revoke is not logged as one:\n%s", cs[2].log)
	}
	if _, _, code := e.etcdleadCmd("status", "--election=probe"); code != 3 {
		t.Fatalf("status with no leader: exit %d, want 3", code)
	}
}

// A newcomer that arrives while the leader steps down must not overlap with
// the old child, which here takes its whole kill timeout to die.
func TestResignWithNewcomerArriving(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c1 := e.start("c1", slow, e.probe("-ignore-term"))
	c1.out.waitFor(t, "c1", "ready", 0)
	done := make(chan int, 1)
	go func() { _, _, code := e.etcdleadCmd("resign", "--election=probe"); done <- code }()
	c1.out.waitFor(t, "c1", "signal SIGTERM", 0)
	c2 := e.start("c2", slow, e.probe()) // arrives during the step-down
	if code := <-done; code != 0 {
		t.Fatalf("resign exit %d", code)
	}
	c1.stoppedBySupervisor(t)
	c2.out.waitFor(t, "c2", "ready", 0)
	stopAll(t, e, c1, c2)
}

// A leader that does not answer (frozen) is removed with --force after
// --timeout; the successor still waits for its lease, which the frozen
// leader's keeper outlives only after killing the child.
func TestResignForce(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // it mostly waits: for a lease to end, a freeze, a --wait
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c1, c2 := e.leaderAndWaiter(slow)
	c1.signal(t, syscall.SIGSTOP)
	_, errs, code := e.etcdleadCmd("resign", "--election=probe", "--timeout=500ms")
	if code != 125 || !strings.Contains(errs, "add --force") {
		t.Fatalf("resign without --force: exit %d, %q", code, errs)
	}
	out, _, code := e.etcdleadCmd("resign", "--election=probe", "--timeout=500ms", "--force")
	if code != 0 || !strings.Contains(out, "deleted the key of c1") {
		t.Fatalf("resign --force: exit %d, %q", code, out)
	}
	c2.out.waitFor(t, "c2", "ready", 0)
	c1.signal(t, syscall.SIGCONT)
	stopAll(t, e, c1, c2)
}

// Cron singletons: the same job fired on three machines at about the same
// time runs once; the others exit 75 at once.
func TestCronSingleton(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	cron := append(fast, "--election=job", "--once", "--no-wait", "--hold-at-least=5s")
	var cs []*candidate
	for _, n := range []string{"m1", "m2", "m3"} {
		cs = append(cs, e.start(n, cron, e.probe("-exit", "0")))
	}
	codes := map[int]int{}
	for _, c := range cs {
		codes[c.exit(t)]++
	}
	if codes[0] != 1 || codes[75] != 2 {
		t.Fatalf("exit codes %v, want one 0 and two 75", codes)
	}
	if runs := e.jobRuns(t); runs != 1 {
		t.Fatalf("the job ran %d times, want once", runs)
	}
}

// --hold-at-least for its purpose: a copy fired after the job ended, but
// within the hold, finds a leader and does not run the job again.
func TestHoldAtLeastKeepsLateCopyOut(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	cron := append(fast, "--election=job", "--once", "--no-wait", "--hold-at-least=30s")
	m1 := e.start("m1", cron, e.probe("-exit", "0"))
	m1.log.waitFor(t, "m1", "holding leadership", 0)
	m2 := e.start("m2", cron, e.probe("-exit", "0"))
	if got := m2.exit(t); got != 75 {
		t.Errorf("the late copy exited %d, want 75", got)
	}
	m1.signal(t, syscall.SIGTERM)
	if got := m1.exit(t); got != 0 {
		t.Errorf("the holder exited %d, want the job's 0", got)
	}
	if runs := e.jobRuns(t); runs != 1 {
		t.Fatalf("the job ran %d times, want once", runs)
	}
}

func TestNoWaitWithoutLeaderRuns(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c := e.start("solo", append(fast, "--no-wait"), e.probe("-exit", "4"))
	if got := c.exit(t); got != 4 {
		t.Fatalf("exit %d, want the child's 4", got)
	}
	down := newEnv(t, []string{"127.0.0.1:1"})
	c = down.start("nowhere", append(fast, "--no-wait", "--dial-timeout=300ms"), down.probe())
	if got := c.exit(t); got != 125 {
		t.Fatalf("--no-wait with etcd unreachable: exit %d, want 125", got)
	}
}

func TestOnceExits76WhenLeadershipLost(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c := e.start("once", append(fast, "--once"), e.probe())
	c.out.waitFor(t, "once", "ready", 0)
	key, _ := leaseOf(t, cluster.Client(t), e.prefix, "once")
	if _, err := cluster.Client(t).Delete(ctxT(t), key); err != nil {
		t.Fatal(err)
	}
	c.stoppedBySupervisor(t)
	if got := c.exit(t); got != 76 {
		t.Fatalf("exit %d, want 76", got)
	}
}

func TestTimeoutExits124(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c := e.start("slowjob", append(fast, "--timeout=1s"), e.probe())
	c.out.waitFor(t, "slowjob", "signal SIGTERM", 0)
	if got := c.exit(t); got != 124 {
		t.Fatalf("exit %d, want 124", got)
	}
}

func TestRestartPolicies(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	c := e.start("always", append(fast, "--restart=always"), e.probe("-exit", "0"))
	_, i := c.out.waitFor(t, "always", "ready", 0)
	c.out.waitFor(t, "always", "ready", i+1)
	c.signal(t, syscall.SIGTERM)
	if got := c.exit(t); got != 0 {
		t.Fatalf("--restart=always stopped while backing off: exit %d, want 0", got)
	}
	c = e.start("onfail-ok", append(fast, "--restart=on-failure"), e.probe("-exit", "0"))
	if got := c.exit(t); got != 0 {
		t.Fatalf("--restart=on-failure, exit 0: got %d", got)
	}
	c = e.start("onfail", append(fast, "--restart=on-failure"), e.probe("-exit", "3"))
	_, i = c.out.waitFor(t, "onfail", "ready", 0)
	c.out.waitFor(t, "onfail", "ready", i+1)
	c.signal(t, syscall.SIGTERM)
	c.exit(t)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /leader answers 200 on exactly one instance; /healthz on both.
func TestHTTPStatusEndpoints(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	a1, a2 := freeAddr(t), freeAddr(t)
	c1 := e.start("c1", append(fast, "--status-addr="+a1), e.probe())
	c1.out.waitFor(t, "c1", "ready", 0)
	c2 := e.start("c2", append(fast, "--status-addr="+a2), e.probe())
	c2.log.waitFor(t, "c2", "waiting on predecessor", 0)
	for addr, want := range map[string]int{a1: 200, a2: 503} {
		if code, _ := httpGet(t, "http://"+addr+"/leader"); code != want {
			t.Errorf("%s/leader = %d, want %d", addr, code, want)
		}
		if code, body := httpGet(t, "http://"+addr+"/healthz"); code != 200 {
			t.Errorf("%s/healthz = %d %q, want 200", addr, code, body)
		}
	}
	_, body := httpGet(t, "http://"+a1+"/status")
	var s ops.Instance
	if err := json.Unmarshal([]byte(body), &s); err != nil || s.Role != ops.RoleLeading || !s.Leading || s.ID != "c1" || s.Rev == 0 {
		t.Errorf("/status = %s (%v)", body, err)
	}
	_, metrics := httpGet(t, "http://"+a1+"/metrics")
	for _, want := range []string{"etcdlead_is_leader 1", `etcdlead_leadership_changes_total{reason="elected"} 1`,
		"etcdlead_child_starts_total 1", "etcdlead_renewal_duration_seconds_count",
		`etcdlead_info{election="probe",id="c1",version="`, "etcdlead_fence_firings_total 0", "go_goroutines "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	stopAll(t, e, c1, c2)
}

// Type=notify: READY=1 once campaigning, STATUS= with the role,
// WATCHDOG=1 while renewals succeed, and STOPPING=1 when a stop begins,
// through a socket the test opens.
func TestSdNotify(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := e.start("sd", fast, e.probe(), "NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=400000")
	buf := make([]byte, 4096)
	deadline := time.Now().Add(safety)
	var got []string
	await := func(want ...string) {
		t.Helper()
		for len(want) > 0 {
			_ = conn.SetReadDeadline(deadline)
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("still waiting for %q; got %q: %v", want[0], got, err)
			}
			msg := string(buf[:n])
			got = append(got, msg)
			if strings.HasPrefix(msg, want[0]) {
				want = want[1:]
			}
		}
	}
	await("READY=1", "STATUS=leading", "WATCHDOG=1")
	c.signal(t, syscall.SIGTERM)
	await("STOPPING=1", "STATUS=stopping")
	// The child's status, passed through: README.md's unit lists it in
	// SuccessExitStatus= (TestReadmeSystemdUnitVerifies).
	if code := c.exit(t); code != 143 {
		t.Errorf("exit %d after systemd's SIGTERM, want the child's 143", code)
	}
}

// A candidate's id as etcd holds it may have been written by another tool:
// status's table and resign's lines print it on one line, escaped, so it
// can neither forge rows nor reach the terminal as escape sequences; --json
// keeps the value itself.
func TestStatusAndResignEscapeForgedValues(t *testing.T) {
	skipIfShort(t)
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	cli := cluster.Client(t)
	lease, err := cli.Grant(ctxT(t), 60)
	if err != nil {
		t.Fatal(err)
	}
	const forged = "web-9/1\nforged    leader     evil/1  1  15s  etcdlead/x\x1b[2J"
	l, err := campaign.NewLayout(e.prefix, "forged")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctxT(t), l.QueueKey(lease.ID), forged, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	out, errs, code := e.etcdleadCmd("status", "--election=forged")
	if code != 0 {
		t.Fatalf("status: exit %d, %s", code, errs)
	}
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 2 || strings.ContainsRune(out, 0x1b) ||
		!strings.Contains(lines[1], `"web-9/1\nforged    leader     evil/1  1  15s  etcdlead/x\x1b[2J"`) {
		t.Errorf("status printed the forged id raw, or as more than one row:\n%s", out)
	}
	if el := e.status(t, "forged"); el.Leader == nil || el.Leader.ID != forged {
		t.Errorf("status --json lost the value: %+v", el.Leader)
	}
	_, errs, code = e.etcdleadCmd("resign", "--election=forged", "--id=web-9/1")
	if code != 3 || strings.Count(errs, "\n") != 1 || strings.ContainsRune(errs, 0x1b) {
		t.Errorf("resign --id of another: exit %d, want 3 and one clean line:\n%s", code, errs)
	}
	_, errs, code = e.etcdleadCmd("resign", "--election=forged", "--timeout=200ms")
	if code != 125 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, `"web-9/1\nforged`) {
		t.Errorf("resign of a leader that does not answer: exit %d, want 125 and one clean line:\n%s", code, errs)
	}
}
