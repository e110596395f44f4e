package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

type mode int

const (
	passMode mode = iota
	blackholeMode
	resetMode
)

// Proxy forwards every TCP connection made to Addr to the target. Its methods
// may be called from any goroutine.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // cancelled by Close, to abort upstream dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the proxy started

	mu     sync.Mutex
	mode   mode
	delay  time.Duration // each way, while passing
	closed bool
	links  map[*link]struct{} // open connections, in any mode
}

// link is one client connection and, once dialled, its upstream connection.
// Its fields are guarded by Proxy.mu.
type link struct {
	client   *net.TCPConn
	upstream *net.TCPConn // nil while dialling and when accepted during a blackhole
}

// New starts a proxy on a free loopback port that forwards to target, a
// "host:port" address. Close it when done.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target: target,
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		links:  make(map[*link]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address clients should dial, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pass makes the proxy forward traffic, which it does from the start. After a
// Blackhole it first resets every connection, since bytes were lost and the
// streams cannot be resumed; clients then reconnect to a working path.
func (p *Proxy) Pass() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode != passMode {
		p.dropAll(true)
	}
	p.mode = passMode
}

// Blackhole stops all traffic: existing and new connections stay open, but no
// byte and no FIN or RST moves in either direction; what the peers send is
// discarded. Bytes the proxy was already forwarding may still arrive.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = blackholeMode
}

// Delay makes every byte that passes from now on, either way, arrive d
// after the proxy read it, in order: a link with a round trip of 2d. Bytes
// read before keep the delay they were read with. Delay(0) ends it.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Reset closes every connection with a TCP RST on both sides, and resets each
// new connection as soon as it is accepted, until Pass or Blackhole.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = resetMode
	p.dropAll(true)
}

// Close stops the proxy, closes all connections and returns once every
// goroutine it started has finished.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.dropAll(false)
	p.mu.Unlock()

	p.cancel()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			// Close is the only expected cause; on any other the
			// proxy stops accepting, and the test sees its dials fail.
			return
		}
		p.admit(c.(*net.TCPConn))
	}
}

func (p *Proxy) admit(c *net.TCPConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode == resetMode {
		closeConn(c, true)
		return
	}
	l := &link{client: c}
	p.links[l] = struct{}{}
	p.wg.Add(1)
	if p.mode == blackholeMode {
		// Not dialling keeps the server unaware of the connection, as it
		// would be if the SYN had been lost past the client's network.
		go p.drain(l.client)
	} else {
		go p.dial(l)
	}
}

// dial connects l upstream and starts forwarding. It runs outside p.mu, so
// the mode may have changed, or l been dropped, by the time it connects.
func (p *Proxy) dial(l *link) {
	defer p.wg.Done()
	var d net.Dialer
	c, err := d.DialContext(p.ctx, "tcp", p.target)

	p.mu.Lock()
	defer p.mu.Unlock()
	if _, open := p.links[l]; !open {
		if err == nil {
			c.Close()
		}
		return
	}
	switch {
	case err == nil:
		l.upstream = c.(*net.TCPConn)
		p.wg.Add(2)
		go p.pipe(l, l.client, l.upstream)
		go p.pipe(l, l.upstream, l.client)
	case p.mode == passMode:
		// A reset is the nearest a proxy that has already accepted
		// can come to "connection refused".
		p.drop(l, true)
	default:
		p.wg.Add(1)
		go p.drain(l.client)
	}
}

// pipe copies src to dst while the proxy passes traffic and discards what it
// reads otherwise. What it reads goes, with the time it is due, to a writer
// of its own, so that a delay holds up neither the reads nor what follows.
func (p *Proxy) pipe(l *link, src, dst *net.TCPConn) {
	defer p.wg.Done()
	type chunk struct {
		b   []byte
		due time.Time
	}
	chunks := make(chan chunk, 256)
	written := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(written)
		for c := range chunks {
			// The delay is the fault itself: the bytes wait for their time.
			time.Sleep(time.Until(c.due))
			if _, err := dst.Write(c.b); err != nil {
				for range chunks {
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if pass, delay := p.passing(); n > 0 && pass {
			chunks <- chunk{b: bytes.Clone(buf[:n]), due: time.Now().Add(delay)}
		}
		if err != nil {
			// What was read goes out before the close it preceded.
			close(chunks)
			<-written
			p.mu.Lock()
			// In a blackhole even a closing peer must go unnoticed by
			// the other side, so l stays open until the mode changes.
			if p.mode == passMode {
				p.drop(l, errors.Is(err, syscall.ECONNRESET))
			}
			p.mu.Unlock()
			return
		}
	}
}

// drain reads and discards what a blackholed client sends, until the
// connection is closed by a mode change or Close, so its goroutine ends then.
func (p *Proxy) drain(c *net.TCPConn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

func (p *Proxy) passing() (bool, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode == passMode, p.delay
}

// dropAll closes every link; p.mu must be held.
func (p *Proxy) dropAll(rst bool) {
	for l := range p.links {
		p.drop(l, rst)
	}
}

// drop closes both sides of l unless already done; p.mu must be held.
// Closing unblocks the goroutines reading or writing l, which then end.
func (p *Proxy) drop(l *link, rst bool) {
	if _, open := p.links[l]; !open {
		return
	}
	delete(p.links, l)
	closeConn(l.client, rst)
	if l.upstream != nil {
		closeConn(l.upstream, rst)
	}
}

// closeConn closes c, with an RST instead of a FIN if rst is set: a zero
// linger makes the kernel discard unsent data and abort the connection.
func closeConn(c *net.TCPConn, rst bool) {
	if rst {
		_ = c.SetLinger(0)
	}
	_ = c.Close()
}
