package campaign

import (
	"errors"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/bootclock"
	"github.com/etcdlead/etcdlead/internal/testsupport/etcdtest"
)

// The start read refuses a start while the election is paused, whatever
// the guard heard: a pause put after the term enqueued, whose watch event
// has not reached the guard (a stalled stream) when the term ahead leaves,
// is found by the read that decides the start. Here the term is enqueued
// with no guard at all, so only the read can tell.
func TestStartReadRefusesWhilePaused(t *testing.T) {
	cluster := etcdtest.Start(t, etcdtest.Options{})
	cli := cluster.Client(t)
	l, err := NewLayout("test/", "start-read-pause")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Client: cli, Layout: l, ID: "c1",
		Timing: Timing{TTL: 10 * time.Second, KillTimeout: 750 * time.Millisecond, FenceMargin: 250 * time.Millisecond}, RequestTimeout: 5 * time.Second, Now: bootclock.Now})
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.grant(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer term.Revoke()
	if _, err := term.enqueue(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := term.startRead(t.Context()); err != nil {
		t.Fatalf("the start read before the pause: %v", err)
	}
	if _, err := Pause(t.Context(), cli, l, PauseRecord{By: "test", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := term.startRead(t.Context()); !errors.Is(err, ErrPaused) {
		t.Fatalf("the start read while paused: %v, want %v", err, ErrPaused)
	}
}
