package main

import (
	"encoding/binary"
	"net"
	"sync"
)

// stampProxy sits between one etcdctl process and etcd, forwards bytes
// untouched, and stamps every HTTP/2 frame header that crosses it with the
// bench's CLOCK_MONOTONIC: what etcdctl lock does on the wire is the part of
// its handoff that can be seen from outside without slowing the process
// itself down (strace stops the traced process at every traced system
// call). The frames' contents stay unread: gRPC's method names are
// HPACK-compressed, so requests are told apart by their order.
type stampProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frames []h2frame
	conns  []net.Conn
	nconn  int
}

// h2frame is one frame header as it crossed the proxy.
type h2frame struct {
	t      int64 // bench clock at the read that completed the header
	conn   int   // which of the proxy's connections
	up     bool  // client → etcd
	typ    byte  // 0 DATA, 1 HEADERS, 3 RST_STREAM, 4 SETTINGS, 6 PING, 8 WINDOW_UPDATE...
	stream uint32
}

const (
	h2Data    = 0
	h2Headers = 1
)

func newStampProxy(target string) (*stampProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &stampProxy{ln: ln, target: target}
	go p.accept()
	return p, nil
}

func (p *stampProxy) Addr() string { return p.ln.Addr().String() }

func (p *stampProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// Frames returns a copy of every frame stamped so far.
func (p *stampProxy) Frames() []h2frame {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]h2frame(nil), p.frames...)
}

func (p *stampProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		for _, x := range []net.Conn{c, s} {
			if tc, ok := x.(*net.TCPConn); ok {
				_ = tc.SetNoDelay(true)
			}
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		n := p.nconn
		p.nconn++
		p.mu.Unlock()
		go p.pipe(n, true, c, s)
		go p.pipe(n, false, s, c)
	}
}

// pipe copies one direction; the stamp is taken at the read, before the
// bytes are passed on.
func (p *stampProxy) pipe(conn int, up bool, from, to net.Conn) {
	defer from.Close()
	defer to.Close()
	var ps h2parser
	if up {
		ps.preface = len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			t := mono()
			var got []h2frame
			ps.feed(buf[:n], func(typ byte, stream uint32) {
				got = append(got, h2frame{t: t, conn: conn, up: up, typ: typ, stream: stream})
			})
			if len(got) > 0 {
				p.mu.Lock()
				p.frames = append(p.frames, got...)
				p.mu.Unlock()
			}
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// h2parser finds frame headers in one direction's byte stream.
type h2parser struct {
	preface int // client preface bytes still to skip
	hdr     [9]byte
	n       int // header bytes held
	skip    int // payload bytes still to skip
}

func (p *h2parser) feed(b []byte, emit func(typ byte, stream uint32)) {
	for len(b) > 0 {
		switch {
		case p.preface > 0:
			k := min(p.preface, len(b))
			p.preface -= k
			b = b[k:]
		case p.skip > 0:
			k := min(p.skip, len(b))
			p.skip -= k
			b = b[k:]
		default:
			k := copy(p.hdr[p.n:], b)
			p.n += k
			b = b[k:]
			if p.n == len(p.hdr) {
				p.n = 0
				p.skip = int(p.hdr[0])<<16 | int(p.hdr[1])<<8 | int(p.hdr[2])
				emit(p.hdr[3], binary.BigEndian.Uint32(p.hdr[5:9])&0x7fffffff)
			}
		}
	}
}
