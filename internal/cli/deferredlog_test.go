package cli

import (
	"bytes"
	"strings"
	"testing"
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
