package e2e

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// `etcdlead run --holders N` (docs/design.md, "More than one holder"). The
// probe run with -holders N holds its slot's lock and one of N count locks
// for as long as it or anything it started lives: a child in a slot that
// another child holds, or beside N others, says OVERLAP, which
// journalLines fails on.

func holdersFlags(n int) []string { return append(slices.Clone(fast), fmt.Sprintf("--holders=%d", n)) }

// readyTotal is how many children of cs have said they are ready, in all.
func readyTotal(cs []*candidate) int {
	n := 0
	for _, c := range cs {
		n += c.out.count("ready pid")
	}
	return n
}

// waitReadyTotal blocks until the children of cs have said they are ready
// want times in all, and fails if they say so more often.
func waitReadyTotal(t *testing.T, cs []*candidate, want int) {
	t.Helper()
	timeout := time.After(safety)
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timeout)}}
		for _, c := range cs {
			_, _, changed := c.out.snapshot()
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(changed)})
		}
		switch got := readyTotal(cs); {
		case got == want:
			return
		case got > want:
			t.Fatalf("%d children started in all, want %d", got, want)
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			t.Fatalf("%d children started within %s, want %d", readyTotal(cs), safety, want)
		}
	}
}

// holding returns the candidates whose latest child still runs: said ready
// and was told to stop no more often than it started.
func holding(cs []*candidate, except ...*candidate) []*candidate {
	var out []*candidate
	for _, c := range cs {
		if c.running() && !slices.Contains(except, c) && c.out.count("ready pid") > c.log.count("child exited") {
			out = append(out, c)
		}
	}
	return out
}

// Six candidates of --holders 2 and of 3: N children start, no more; a
// holder cut off from etcd, killed with kill -9, frozen, or whose queue key
// or slot key is deleted is stopped and replaced by exactly one waiter,
// never beside it; the probes' slot and count locks say no two children ever shared a
// slot and no more than N ran at once.
func TestHoldersFaults(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("holders-%d", n), func(t *testing.T) {
			cluster := etcdtest.Start(t, etcdtest.Options{})
			cli := cluster.Client(t)
			e := newEnv(t, cluster.Endpoints())
			p := newProxy(t, cluster.Endpoints()[0])
			// Children that ignore SIGTERM live on for the kill timeout
			// after their term ended: a successor that did not wait for
			// the old lease would start beside them.
			flags, probe := holdersFlags(n), e.probe("-holders", fmt.Sprint(n), "-ignore-term")
			cs := []*candidate{e.via(p.Addr()).start("c0", flags, probe)}
			cs[0].out.waitFor(t, "c0", "ready", 0)
			for i := 1; i < 6; i++ {
				cs = append(cs, e.start(fmt.Sprintf("c%d", i), flags, probe))
			}
			waitReadyTotal(t, cs, n)
			for _, c := range cs {
				if c.out.count("ready pid") == 0 {
					c.log.waitFor(t, c.name, "waiting on predecessor", 0)
				}
			}
			if got := len(holding(cs)); got != n {
				t.Fatalf("%d children run, want %d", got, n)
			}
			started := n

			// c0 cut off: its keeper fences its child before its lease can
			// end; only then does a waiter take the slot.
			p.Blackhole()
			cs[0].log.waitFor(t, "c0", "fence: lease deadline near", 0)
			started++
			waitReadyTotal(t, cs, started)
			p.Pass()
			_, i := cs[0].log.waitFor(t, "c0", "child exited", 0)
			cs[0].log.waitFor(t, "c0", "waiting on predecessor", i)

			// kill -9 of a holder's supervisor: its keeper stops the child.
			k := holding(cs, cs[0])[0]
			k.signal(t, syscall.SIGKILL)
			k.out.waitFor(t, k.name, "signal SIGTERM", 0)
			started++
			waitReadyTotal(t, cs, started)

			// A frozen holder: its keeper fences on its own clock.
			f := holding(cs, cs[0], k)[0]
			f.signal(t, syscall.SIGSTOP)
			f.log.waitFor(t, f.name, "fence: lease deadline near", 0)
			started++
			waitReadyTotal(t, cs, started)
			f.signal(t, syscall.SIGCONT)
			_, i = f.log.waitFor(t, f.name, "child exited", 0)
			f.log.waitFor(t, f.name, "waiting on predecessor", i)

			// A holder's queue key deleted by hand: it stops its child and
			// only then revokes, which lets a waiter start.
			d := holding(cs, cs[0], k, f)[0]
			key, _ := leaseOf(t, cli, e.prefix, d.name)
			del(t, cli, key)
			d.log.waitFor(t, d.name, "key deleted", 0)
			started++
			waitReadyTotal(t, cs, started)

			// A holder's slot key deleted by hand: its term ends, and the
			// waiter that then finds the slot free still waits for the old
			// lease, which its sentinel shows, before it starts.
			s := holding(cs)[0]
			ready := s.out.matching("ready pid")
			slot, _, _ := strings.Cut(ready[len(ready)-1].text[strings.Index(ready[len(ready)-1].text, " slot=")+len(" slot="):], " ")
			from := s.log.mark()
			del(t, cli, e.prefix+"probe.slot/"+slot)
			s.log.waitFor(t, s.name, "key deleted", from)
			started++
			waitReadyTotal(t, cs, started)
			if got := len(holding(cs)); got > n {
				t.Errorf("%d children run, want at most %d", got, n)
			}
			for _, c := range cs {
				for _, l := range c.out.matching("ready pid") {
					if !strings.Contains(l.text, " slot=") || strings.Contains(l.text, " slot= ") {
						t.Errorf("%s: a child without its slot: %q", c.name, l.text)
					}
				}
			}
			stopAll(t, e, cs...)
		})
	}
}

// Every candidate of an election agrees on --holders: one that does not
// refuses at once with one line and 125, whether its number is larger or
// smaller, and leaves the holders alone. /leader answers 200 on every
// holder.
func TestHoldersMismatchAndLeaderEndpoint(t *testing.T) {
	skipIfShort(t)
	t.Parallel() // its own etcd; it mostly waits
	cluster := etcdtest.Start(t, etcdtest.Options{})
	e := newEnv(t, cluster.Endpoints())
	a1, a2, a3 := freeAddr(t), freeAddr(t), freeAddr(t)
	probe := e.probe("-holders", "2")
	c1 := e.start("c1", append(holdersFlags(2), "--status-addr="+a1), probe)
	c2 := e.start("c2", append(holdersFlags(2), "--status-addr="+a2), probe)
	c1.out.waitFor(t, "c1", "ready", 0)
	c2.out.waitFor(t, "c2", "ready", 0)
	c3 := e.start("c3", append(holdersFlags(2), "--status-addr="+a3), probe)
	c3.log.waitFor(t, "c3", "waiting on predecessor", 0)
	for addr, want := range map[string]int{a1: 200, a2: 200, a3: 503} {
		if code, _ := httpGet(t, "http://"+addr+"/leader"); code != want {
			t.Errorf("%s/leader = %d, want %d", addr, code, want)
		}
	}
	c1.log.waitFor(t, "c1", "holder", 0)

	// status reads N from etcd and shows both holders with their slots.
	out, errs, code := e.etcdleadCmd("status", "--election=probe", "--json")
	var st struct {
		Holders int `json:"holders"`
		Holding []struct {
			ID   string `json:"id"`
			Slot *int   `json:"slot"`
		} `json:"holding"`
		Waiting []struct {
			ID string `json:"id"`
		} `json:"waiting"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
		t.Fatalf("status: exit %d, %v\n%s%s", code, err, out, errs)
	}
	if st.Holders != 2 || len(st.Holding) != 2 || len(st.Waiting) != 1 || st.Waiting[0].ID != "c3" ||
		st.Holding[0].Slot == nil || st.Holding[1].Slot == nil || *st.Holding[0].Slot == *st.Holding[1].Slot {
		t.Errorf("status shows %+v, want 2 holders in slots 0 and 1, and c3 waiting:\n%s", st, out)
	}
	table, _, _ := e.etcdleadCmd("status", "--election=probe")
	if strings.Count(table, "holder, slot ") != 2 || !strings.Contains(table, "waiting 1") {
		t.Errorf("status table:\n%s", table)
	}
	// status --watch shows the holders as well.
	w := e.watchStatus("probe", nil)
	if line, _ := w.out.waitFor(t, "watch", "holders=2", 0); strings.Count(line, " holder=") != 2 || !strings.Contains(line, " waiting=1") {
		t.Errorf("status --watch line %q, want holders=2, two holder= fields and waiting=1", line)
	}
	w.signal(t, syscall.SIGTERM)
	if code := w.exit(t); code != 0 {
		t.Errorf("status --watch ended with %d on SIGTERM, want 0", code)
	}
	for _, h := range []string{"--holders=3", "--holders=1"} {
		m := e.start("m", append(slices.Clone(fast), h), probe)
		if code := m.exit(t); code != 125 {
			t.Errorf("%s beside holders of 2: exit %d, want 125", h, code)
		}
		last, _ := m.log.waitFor(t, "m", "stop every candidate", 0)
		if !strings.Contains(last, h[len("--"):len("--holders=")-1]) || m.out.count("ready") != 0 {
			t.Errorf("%s: refusal %q, and %d children started", h, last, m.out.count("ready"))
		}
	}
	if len(holding([]*candidate{c1, c2, c3})) != 2 {
		t.Errorf("the holders did not keep running beside the refused candidates")
	}
	stopAll(t, e, c1, c2, c3)
}
