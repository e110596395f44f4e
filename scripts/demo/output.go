package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// console prints every line of the demo: its narration and the candidates'
// output, each behind a name, so that the interleaved streams stay readable.
type console struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

func (c *console) line(who, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, "%6.2fs %-11s | %s\n", time.Since(c.start).Seconds(), who, text)
}

func (c *console) say(format string, args ...any) { c.line("demo", fmt.Sprintf(format, args...)) }

// writer prints what is written to it line by line under who; etcd's logger
// writes whole lines, so no partial line is ever held back.
func (c *console) writer(who string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			c.line(who, l)
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// hclogLine matches etcdlead's text log format: time, [LEVEL], logger, message.
var hclogLine = regexp.MustCompile(`^\S+ \[(\w+)\]\s+(\S+): (.*)$`)

var revField = regexp.MustCompile(`\brev=(\d+)`)

// keyMessages are the INFO messages that tell the story of an election; the
// rest (start-up settings, backoff) only add noise to a demo.
var keyMessages = []string{
	"campaigning", "waiting on predecessor", "waiting for predecessor", "elected",
	"child started", "child stopping", "child exited", "lease revoked", "stop signal",
}

// show prints one line of a candidate's output and turns the lines the demo
// waits for into events.
func show(con *console, ev *events, c *candidate, text string) {
	now := time.Now()
	if strings.HasPrefix(text, "worker: ") {
		e := event{c: c, kind: workerLine, at: now}
		if m := revField.FindStringSubmatch(text); m != nil {
			e.rev, _ = strconv.ParseInt(m[1], 10, 64)
		}
		con.line(c.id, text)
		ev.add(e)
		return
	}
	m := hclogLine.FindStringSubmatch(text)
	if m == nil {
		con.line(c.id, text)
		return
	}
	level, logger, msg := m[1], m[2], m[3]
	if level != "INFO" {
		con.line(c.id, "["+level+"] "+logger+": "+msg)
		return
	}
	for _, k := range keyMessages {
		if strings.HasPrefix(msg, k) {
			con.line(c.id, logger+": "+msg)
			break
		}
	}
	if strings.HasPrefix(msg, "waiting on predecessor") {
		ev.add(event{c: c, kind: queued, at: now})
	}
}

type eventKind int

const (
	workerLine eventKind = iota // the leader's worker printed a line
	queued                      // a candidate waits behind a predecessor
	exited                      // an etcdlead process ended
)

type event struct {
	c    *candidate
	kind eventKind
	rev  int64 // the worker's fencing token, for workerLine
	at   time.Time
}

// events is the history of what the candidates did, which the scenario
// waits on; a history rather than a channel, so no event is lost while
// nobody waits.
type events struct {
	mu      sync.Mutex
	list    []event
	changed chan struct{}
}

func newEvents() *events { return &events{changed: make(chan struct{})} }

func (h *events) add(e event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.list = append(h.list, e)
	close(h.changed)
	h.changed = make(chan struct{})
}

// wait returns the first event that matches. A candidate that exits without
// being told to fails the wait at once rather than after the timeout.
func (h *events) wait(ctx context.Context, timeout time.Duration, what string, match func(event) bool) (event, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for seen := 0; ; {
		h.mu.Lock()
		list, changed := h.list, h.changed
		h.mu.Unlock()
		for ; seen < len(list); seen++ {
			e := list[seen]
			if match(e) {
				return e, nil
			}
			if e.kind == exited && !e.c.told.Load() {
				return e, fmt.Errorf("%s exited unexpectedly (%v) while waiting for %s", e.c.id, e.c.err, what)
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			return event{}, fmt.Errorf("no %s within %v", what, timeout)
		case <-ctx.Done():
			return event{}, ctx.Err()
		}
	}
}
