package faultproxy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlead/etcdlead/internal/testsupport/faultproxy"
)

// silence is how long a read must stay unanswered to count as blackholed.
// On loopback an answer takes microseconds, so this is ample even on a busy
// machine, while keeping the test fast.
const silence = 300 * time.Millisecond

// echoServer answers every connection with what it receives. closeConns lets
// a test make the server hang up on its side.
type echoServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				_, _ = io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.closeConns()
		s.wg.Wait()
	})
	return s
}

func (s *echoServer) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

// newProxy returns a proxy to target, closed at cleanup, after which the test
// fails if any goroutine of the proxy is still alive.
func newProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	t.Cleanup(func() { checkNoProxyGoroutines(t) })
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p
}

// checkNoProxyGoroutines looks for the proxy's functions in all stacks rather
// than counting goroutines, so other tests' goroutines cannot disturb it.
// Close has waited for them all, but a goroutine that called wg.Done may not
// have returned yet, hence the short grace period.
func checkNoProxyGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "faultproxy.(*Proxy)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy goroutines left after Close:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends msg and returns what comes back, or the read's error.
func roundTrip(c net.Conn, msg string, timeout time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func wantEcho(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	got, err := roundTrip(c, msg, 10*time.Second)
	if err != nil || got != msg {
		t.Fatalf("round trip %q = %q, %v", msg, got, err)
	}
}

func wantSilence(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	got, err := roundTrip(c, msg, silence)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("round trip %q through blackhole = %q, %v; want a read timeout", msg, got, err)
	}
}

func wantReset(t *testing.T, c net.Conn) {
	t.Helper()
	got, err := roundTrip(c, "x", 10*time.Second)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("round trip after reset = %q, %v; want ECONNRESET", got, err)
	}
}

// wantResetOnDial checks that a new connection to addr is reset. The RST may
// come so soon after the handshake that the dial itself reports it.
func wantResetOnDial(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dial %s: %v; want success or ECONNRESET", addr, err)
		}
		return
	}
	defer c.Close()
	wantReset(t, c)
}

func TestPass(t *testing.T) {
	p := newProxy(t, newEchoServer(t).ln.Addr().String())
	c := dial(t, p.Addr())
	wantEcho(t, c, "hello")
	big := string(bytes.Repeat([]byte("0123456789"), 100_000))
	wantEcho(t, c, big)
}

// A delayed link still carries every byte in order, and no round trip is
// shorter than the delay both ways: a lower bound, which a busy machine
// cannot break.
func TestDelay(t *testing.T) {
	p := newProxy(t, newEchoServer(t).ln.Addr().String())
	c := dial(t, p.Addr())
	wantEcho(t, c, "before")
	const d = 100 * time.Millisecond
	p.Delay(d)
	for _, msg := range []string{"one", string(bytes.Repeat([]byte("0123456789"), 100_000))} {
		start := time.Now()
		wantEcho(t, c, msg)
		if took := time.Since(start); took < 2*d {
			t.Errorf("a round trip of %d bytes took %v through a delay of %v each way", len(msg), took, d)
		}
	}
	// Writes in a row keep their order through the queue.
	var want strings.Builder
	for i := range 200 {
		msg := strconv.Itoa(i) + ","
		want.WriteString(msg)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, want.Len())
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want.String() {
		t.Fatalf("200 writes through the delay came back as %q, %v", got, err)
	}
	p.Delay(0)
	wantEcho(t, c, "after")
}

func TestBlackholeThenPass(t *testing.T) {
	echo := newEchoServer(t)
	p := newProxy(t, echo.ln.Addr().String())
	old := dial(t, p.Addr())
	wantEcho(t, old, "before")

	p.Blackhole()
	wantSilence(t, old, "existing")
	// The TCP connect succeeds, as the kernel completes it before the
	// proxy even accepts, but nothing comes back.
	fresh := dial(t, p.Addr())
	wantSilence(t, fresh, "new")
	// A server hanging up must not show through the blackhole either.
	echo.closeConns()
	wantSilence(t, old, "after server close")

	p.Pass()
	// Connections that lived through the blackhole are reset, so their
	// clients reconnect instead of waiting on a corrupted stream.
	wantReset(t, old)
	wantReset(t, fresh)
	wantEcho(t, dial(t, p.Addr()), "after")
}

func TestReset(t *testing.T) {
	p := newProxy(t, newEchoServer(t).ln.Addr().String())
	old := dial(t, p.Addr())
	wantEcho(t, old, "before")

	p.Reset()
	wantReset(t, old)
	wantResetOnDial(t, p.Addr())

	p.Pass()
	wantEcho(t, dial(t, p.Addr()), "after")
}

func TestResetThenBlackhole(t *testing.T) {
	p := newProxy(t, newEchoServer(t).ln.Addr().String())
	p.Reset()
	p.Blackhole()
	wantSilence(t, dial(t, p.Addr()), "x")
	p.Pass()
	wantEcho(t, dial(t, p.Addr()), "y")
}

func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := newProxy(t, addr)
	wantResetOnDial(t, p.Addr())
}

// TestCloseEndsEverything closes the proxy while it has connections in every
// state; newProxy's cleanup then checks that no goroutine is left.
func TestCloseEndsEverything(t *testing.T) {
	p := newProxy(t, newEchoServer(t).ln.Addr().String())
	passing := dial(t, p.Addr())
	wantEcho(t, passing, "x")
	p.Blackhole()
	held := dial(t, p.Addr())
	wantSilence(t, held, "y")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []net.Conn{passing, held} {
		if _, err := roundTrip(c, "z", 10*time.Second); err == nil {
			t.Fatal("connection still works after Close")
		}
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("dial after Close succeeded")
	}
}
