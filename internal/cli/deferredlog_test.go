package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/internal/runner"
)

// Lines are kept back until released; past the bound they are written after
// all, in order, so a long wait neither grows memory nor loses lines.
func TestDeferredLog(t *testing.T) {
	var out bytes.Buffer
	d := &deferredLog{out: &out}
	d.Write([]byte("a\n"))
	if out.Len() != 0 {
		t.Fatalf("kept-back line written: %q", out.String())
	}
	d.release(false)
	d.Write([]byte("b\n"))
	if out.String() != "b\n" {
		t.Fatalf("after a dropping release: %q, want only b", out.String())
	}

	out.Reset()
	d = &deferredLog{out: &out}
	line := strings.Repeat("x", 1023) + "\n"
	for range deferredLimit / len(line) {
		d.Write([]byte(line))
	}
	if out.Len() != 0 {
		t.Fatal("lines written before the bound")
	}
	d.Write([]byte("over\n"))
	if !strings.HasSuffix(out.String(), line+"over\n") || out.Len() != deferredLimit+len("over\n") {
		t.Fatalf("past the bound: %d bytes written, want all %d in order", out.Len(), deferredLimit+len("over\n"))
	}
	d.release(false) // nothing is kept back any more
	d.Write([]byte("after\n"))
	if !strings.HasSuffix(out.String(), "over\nafter\n") {
		t.Fatal("a line after the bound was not written at once")
	}
}

// A --once run kept back to its end: a won term releases nothing, the exit
// code decides, and a warning is written at once with what came before it.
func TestDeferredLogUntilEnd(t *testing.T) {
	ended := func(kind runner.Kind, code int) *runEnd {
		return &runEnd{Outcome: &runner.Outcome{Kind: kind, Code: code}}
	}
	for _, tc := range []struct {
		name string
		end  *runEnd
		want string
	}{
		{"the job succeeded", ended(runner.ChildExited, 0), ""},
		{"the job failed", ended(runner.ChildExited, 3), "a\nb\n"},
		{"a silent loss", ended(runner.NotLeader, 0), ""},
		{"leadership lost", ended(runner.LostOnce, 0), "a\nb\n"},
	} {
		var out bytes.Buffer
		d := &deferredLog{out: &out, untilEnd: true}
		d.LevelWrite(hclog.Info, []byte("a\n"))
		d.won()
		d.LevelWrite(hclog.Info, []byte("b\n"))
		if out.Len() != 0 {
			t.Fatalf("%s: written before the end: %q", tc.name, out.String())
		}
		d.end(tc.end)
		if out.String() != tc.want {
			t.Errorf("%s: %q written at the end, want %q", tc.name, out.String(), tc.want)
		}
	}

	var out bytes.Buffer
	d := &deferredLog{out: &out, untilEnd: true}
	d.LevelWrite(hclog.Info, []byte("a\n"))
	d.LevelWrite(hclog.Warn, []byte("w\n"))
	d.LevelWrite(hclog.Info, []byte("b\n"))
	if out.String() != "a\nw\nb\n" {
		t.Fatalf("after a warning: %q written, want every line in order at once", out.String())
	}
	d.end(ended(runner.ChildExited, 0))
	if out.String() != "a\nw\nb\n" {
		t.Fatalf("a successful end after a warning wrote %q more", strings.TrimPrefix(out.String(), "a\nw\nb\n"))
	}

	// Without untilEnd, as before: a won term releases what was kept.
	out.Reset()
	d = &deferredLog{out: &out}
	d.LevelWrite(hclog.Info, []byte("a\n"))
	d.won()
	if out.String() != "a\n" {
		t.Fatalf("a won term of a run that is not --once: %q written, want a", out.String())
	}
}
