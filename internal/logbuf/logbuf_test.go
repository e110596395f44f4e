package logbuf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/etcdlead/etcdlead/internal/testsupport/proctest"
)

// safety bounds every wait on an event; it is never what a test measures.
const safety = 20 * time.Second

// gate is a stream whose writes block until it is opened, like a pipe
// whose reader stalls.
type gate struct {
	open    chan struct{}
	entered chan struct{} // one value per write that reached the stream
	mu      sync.Mutex
	buf     bytes.Buffer
}

func newGate() *gate {
	return &gate{open: make(chan struct{}), entered: make(chan struct{}, 1024)}
}

func (g *gate) Write(p []byte) (int, error) {
	g.entered <- struct{}{}
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *gate) lines() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.Split(strings.TrimSuffix(g.buf.String(), "\n"), "\n")
}

// within fails the test if f does not return within the safety bound: a
// Write that blocks on the stream would hang here.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(safety):
		t.Fatalf("%s did not return: it waits on the stream", what)
	}
}

func TestLinesInOrder(t *testing.T) {
	var out bytes.Buffer
	w := New(&out, 0)
	for i := range 100 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if !w.Flush(safety) {
		t.Fatal("Flush timed out on a stream that takes every write")
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != 100 || got[0] != "line 0" || got[99] != "line 99" {
		t.Fatalf("got %d lines, first %q last %q", len(got), got[0], got[len(got)-1])
	}
	if w.Dropped() != 0 {
		t.Fatalf("dropped %d with room to spare", w.Dropped())
	}
}

// A stalled stream: writes return at once, the overflow is dropped and
// counted, and once the stream drains a notice stands where the lines went
// missing, followed by what was logged after.
func TestBlockedStreamDropsAndCountsThenSaysSo(t *testing.T) {
	g := newGate()
	w := New(g, 40) // room for four 10-byte lines
	within(t, "Write on a blocked stream", func() {
		fmt.Fprintf(w, "line %03d\n", 0)
		<-g.entered // the writer holds line 0 in a write that blocks
		for i := 1; i <= 20; i++ {
			fmt.Fprintf(w, "line %03d\n", i)
		}
	})
	if got := w.Dropped(); got != 16 {
		t.Fatalf("dropped %d, want 16 (lines 5 to 20)", got)
	}
	if w.Flush(10 * time.Millisecond) {
		t.Fatal("Flush reported a drained queue while the stream is blocked")
	}
	close(g.open)
	if !w.Flush(safety) {
		t.Fatal("Flush timed out after the stream opened")
	}
	fmt.Fprintf(w, "line %03d\n", 21)
	if !w.Flush(safety) {
		t.Fatal("Flush timed out")
	}
	want := []string{"line 000", "line 001", "line 002", "line 003", "line 004",
		"etcdlead: 16 log lines dropped while the log stream was blocked", "line 021"}
	if got := g.lines(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("stream got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Two separate runs of drops get a notice each, each at its place.
func TestEachRunOfDropsHasItsNotice(t *testing.T) {
	g := newGate()
	w := New(g, 20)
	fmt.Fprint(w, "a\n")
	<-g.entered
	fmt.Fprint(w, strings.Repeat("b", 19)+"\n") // fills the queue exactly
	fmt.Fprint(w, "c\n")
	fmt.Fprint(w, "d\n")
	close(g.open)
	if !w.Flush(safety) {
		t.Fatal("Flush timed out")
	}
	fmt.Fprint(w, strings.Repeat("e", 30)+"\n") // over the limit alone: dropped
	fmt.Fprint(w, "f\n")
	if !w.Flush(safety) {
		t.Fatal("Flush timed out")
	}
	got := g.lines()
	want := []string{"a", strings.Repeat("b", 19),
		"etcdlead: 2 log lines dropped while the log stream was blocked",
		"etcdlead: 1 log lines dropped while the log stream was blocked", "f"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// On a real pipe that nobody reads, filled to the brim: Write returns, Flush
// gives up at its bound, and the pipe's file description stays blocking
// (it is shared with the child when it is stderr).
func TestFullPipeNeverBlocksWrite(t *testing.T) {
	r, wf := proctest.Full(t)
	defer r.Close()
	defer wf.Close()
	w := New(wf, 0)
	within(t, "Write on a full pipe", func() {
		for i := range 10000 {
			fmt.Fprintf(w, "line %d\n", i)
		}
	})
	if w.Dropped() == 0 {
		t.Fatal("nothing dropped although the pipe never drained")
	}
	if w.Flush(10 * time.Millisecond) {
		t.Fatal("Flush reported success on a full pipe")
	}
	fl, err := unix.FcntlInt(wf.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fl&unix.O_NONBLOCK != 0 {
		t.Fatal("O_NONBLOCK set on the stream's file description")
	}
	// Drain: the queued lines and the notice arrive.
	var got bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = got.ReadFrom(r); close(done) }()
	if !w.Flush(safety) {
		t.Fatal("Flush timed out while the pipe is read")
	}
	wf.Close()
	<-done
	if !strings.Contains(got.String(), "log lines dropped") || !strings.Contains(got.String(), "line 0\n") {
		t.Fatalf("after the drain the pipe held no notice or no first line:\n%.300s", got.String())
	}
}

// The notice has the logger's format: a JSON consumer can parse every line.
func TestNoticeMatchesJSONFormat(t *testing.T) {
	g := newGate()
	w := New(g, 1)
	log := logger(w, hclog.LoggerOptions{Name: "etcdlead", JSONFormat: true, Level: hclog.Error})
	log.Error("too long for the queue")
	close(g.open)
	if !w.Flush(safety) {
		t.Fatal("Flush timed out")
	}
	var m map[string]any
	line := g.lines()[0]
	if err := json.Unmarshal([]byte(line), &m); err != nil || m["dropped"] != float64(1) {
		t.Fatalf("notice %q is not JSON with dropped=1: %v", line, err)
	}
}
