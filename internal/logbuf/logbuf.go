package logbuf

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// DefaultLimit holds a burst of a few hundred log lines: enough that a
// reader slowed down for a moment loses nothing, small enough to be no
// concern for memory.
const DefaultLimit = 64 << 10

// entry is a queued line, or a mark where dropped lines would have been.
type entry struct {
	line    []byte
	dropped int
}

// Writer queues writes for one goroutine that writes them to the stream.
// Each Write is one line (hclog writes each entry with one Write) and is
// kept whole or dropped whole. Safe for concurrent use.
type Writer struct {
	w     io.Writer
	limit int

	mu      sync.Mutex
	queue   []entry
	queued  int // bytes of the lines in queue
	busy    bool
	dropped int // in all, for tests and callers that report it
	notice  func(dropped int) []byte
	drained chan struct{} // closed when the queue is empty and nothing is being written
	wake    chan struct{}
}

// New starts a writer on w that queues at most limit bytes (DefaultLimit if
// limit <= 0). The writer's goroutine lives as long as the process: one
// Writer is meant per stream.
func New(w io.Writer, limit int) *Writer {
	if limit <= 0 {
		limit = DefaultLimit
	}
	b := &Writer{
		w: w, limit: limit,
		notice:  plainNotice,
		drained: make(chan struct{}),
		wake:    make(chan struct{}, 1),
	}
	go b.run()
	return b
}

func plainNotice(n int) []byte {
	return fmt.Appendf(nil, "etcdlead: %d log lines dropped while the log stream was blocked\n", n)
}

// SetNotice sets how the line that reports dropped lines is formatted, so
// that it matches the other lines (text or JSON).
func (b *Writer) SetNotice(f func(dropped int) []byte) {
	b.mu.Lock()
	b.notice = f
	b.mu.Unlock()
}

// Write queues a copy of p, or drops it when the queue is full. It never
// blocks on the stream and never fails.
func (b *Writer) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // a nil line marks dropped ones in the queue
	}
	b.mu.Lock()
	if b.queued+len(p) > b.limit {
		b.dropped++
		if n := len(b.queue); n > 0 && b.queue[n-1].line == nil {
			b.queue[n-1].dropped++
		} else {
			b.queue = append(b.queue, entry{dropped: 1})
		}
	} else {
		b.queue = append(b.queue, entry{line: append([]byte(nil), p...)})
		b.queued += len(p)
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// Dropped is how many lines were dropped so far.
func (b *Writer) Dropped() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}

// Flush waits until everything queued so far, and anything queued
// meanwhile, is written, or until timeout. It reports whether the queue
// drained.
func (b *Writer) Flush(timeout time.Duration) bool {
	b.mu.Lock()
	if len(b.queue) == 0 && !b.busy {
		b.mu.Unlock()
		return true
	}
	drained := b.drained
	b.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-drained:
		return true
	case <-t.C:
		return false
	}
}

func (b *Writer) run() {
	for range b.wake {
		for {
			b.mu.Lock()
			if len(b.queue) == 0 {
				b.busy = false
				close(b.drained)
				b.drained = make(chan struct{})
				b.mu.Unlock()
				break
			}
			e := b.queue[0]
			b.queue[0] = entry{}
			b.queue = b.queue[1:]
			b.queued -= len(e.line)
			b.busy = true
			notice := b.notice
			b.mu.Unlock()
			if e.line == nil {
				e.line = notice(e.dropped)
			}
			// An error loses this line only: the stream may take the next.
			_, _ = b.w.Write(e.line)
		}
	}
}
