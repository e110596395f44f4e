package main

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// mono reads CLOCK_MONOTONIC in nanoseconds: the clock the child stamps its
// lines with, so that times from the bench and from children compare.
func mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// kid is one run of the child program, as seen through its socket.
type kid struct {
	ID     string
	Start  int64 // child's clock at its first instruction
	PPID   int   // the keeper for etcdlead, etcdctl itself for etcdctl lock
	conn   net.Conn
	exitT  int64 // child's clock just before it exited on request; 0 if not
	goneT  int64 // bench's clock when the socket closed
	exited chan struct{}
	gone   chan struct{}
	mu     sync.Mutex
}

// Exit asks the child to exit now.
func (k *kid) Exit() { _, _ = k.conn.Write([]byte("exit\n")) }

// ExitTime waits for the child's own stamp of its exit.
func (k *kid) ExitTime(timeout time.Duration) (int64, error) {
	select {
	case <-k.exited:
		return k.exitT, nil
	default:
	}
	select {
	case <-k.exited:
		return k.exitT, nil
	case <-k.gone:
		select {
		case <-k.exited:
			return k.exitT, nil
		default:
		}
		return 0, fmt.Errorf("child %s closed its socket without an exit stamp", k.ID)
	case <-time.After(timeout):
		return 0, fmt.Errorf("child %s: no exit stamp after %v", k.ID, timeout)
	}
}

// Alive says whether the child's socket is still open.
func (k *kid) Alive() bool {
	select {
	case <-k.gone:
		return false
	default:
		return true
	}
}

// GoneAt waits until the child's socket closed and returns when it did.
func (k *kid) GoneAt(timeout time.Duration) (int64, error) {
	select {
	case <-k.gone:
		return k.goneT, nil
	default:
	}
	select {
	case <-k.gone:
		return k.goneT, nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("child %s still alive after %v", k.ID, timeout)
	}
}

// hub accepts the children's connections. Start events are delivered per
// group: the part of the ID before the first '/'.
type hub struct {
	ln   *net.UnixListener
	Path string
	mu   sync.Mutex
	grp  map[string]chan *kid
	all  []*kid
}

func newHub(path string) (*hub, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	h := &hub{ln: ln, Path: path, grp: map[string]chan *kid{}}
	go h.accept()
	return h, nil
}

func (h *hub) Close() {
	h.ln.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range h.all {
		k.conn.Close()
	}
}

func (h *hub) starts(group string) chan *kid {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.grp[group]
	if !ok {
		c = make(chan *kid, 1024)
		h.grp[group] = c
	}
	return c
}

// NextStart waits for the next child of group to start.
func (h *hub) NextStart(group string, timeout time.Duration) (*kid, error) {
	select {
	case k := <-h.starts(group):
		return k, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("no child of %s started within %v", group, timeout)
	}
}

// Drain forgets start events of group that nobody waited for.
func (h *hub) Drain(group string) {
	c := h.starts(group)
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func (h *hub) accept() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		go h.serve(c)
	}
}

func (h *hub) serve(c net.Conn) {
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 4 || f[0] != "start" {
		c.Close()
		return
	}
	t, _ := strconv.ParseInt(f[2], 10, 64)
	ppid, _ := strconv.Atoi(f[3])
	k := &kid{ID: f[1], Start: t, PPID: ppid, conn: c, exited: make(chan struct{}), gone: make(chan struct{})}
	h.mu.Lock()
	h.all = append(h.all, k)
	h.mu.Unlock()
	group, _, _ := strings.Cut(k.ID, "/")
	h.starts(group) <- k
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "exit" {
			k.exitT, _ = strconv.ParseInt(f[2], 10, 64)
			close(k.exited)
		}
	}
	k.goneT = mono()
	close(k.gone)
	c.Close()
}
