package etcdconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
)

// tlsGuard turns TLS failures that a retry cannot mend into refusals, and
// a plain-text endpoint that meets a TLS listener too (plain.go).
//
// gRPC treats a failed handshake like an unreachable server: it reconnects
// with backoff, and a request waits for a connection until its deadline and
// then says only "context deadline exceeded". So etcdlead would retry a wrong
// CA for ever, and say nothing useful. The guard watches each handshake
// (and the first reads after it, where TLS 1.3 delivers the server's verdict
// on our certificate); once every endpoint has refused, requests in flight
// end at once with the reason, and so do later ones.
type tlsGuard struct {
	cc        Config
	endpoints int

	mu      sync.Mutex
	verdict map[string]error // remote address → nil once accepted, else why it refused
	waiting map[*int]context.CancelCauseFunc
}

func newTLSGuard(cc Config) *tlsGuard {
	return &tlsGuard{cc: cc, endpoints: len(cc.Endpoints),
		verdict: make(map[string]error), waiting: make(map[*int]context.CancelCauseFunc)}
}

// creds wraps the TLS transport credentials so the guard sees each
// handshake.
func (g *tlsGuard) creds(c credentials.TransportCredentials) credentials.TransportCredentials {
	return &guardedCreds{TransportCredentials: c, g: g}
}

// refusedLocked returns the refusal once every endpoint has refused and none has
// been accepted since.
func (g *tlsGuard) refusedLocked() error {
	if len(g.verdict) < g.endpoints {
		return nil
	}
	var first error
	for _, err := range g.verdict {
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (g *tlsGuard) record(addr string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.verdict[addr] = err
	if r := g.refusedLocked(); r != nil {
		for _, cancel := range g.waiting {
			cancel(r)
		}
	}
}

func (g *tlsGuard) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	key := new(int)
	g.mu.Lock()
	if r := g.refusedLocked(); r != nil {
		g.mu.Unlock()
		return r
	}
	g.waiting[key] = cancel
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.waiting, key)
		g.mu.Unlock()
	}()
	err := invoker(ctx, method, req, reply, cc, opts...)
	var r *refusal
	if err != nil && errors.As(context.Cause(ctx), &r) {
		return r
	}
	return err
}

// stream refuses a new stream once every endpoint has refused. A stream
// that is already waiting for a connection waits on until its context ends.
func (g *tlsGuard) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	g.mu.Lock()
	r := g.refusedLocked()
	g.mu.Unlock()
	if r != nil {
		return nil, r
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// explain turns a TLS error into a refusal, or returns nil for errors that
// a retry may mend (a timeout, a reset connection).
func (g *tlsGuard) explain(addr string, err error) *refusal {
	var (
		unknownCA x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
		verify    *tls.CertificateVerificationError
		notTLS    tls.RecordHeaderError
		op        *net.OpError
	)
	ca := "a CA this machine trusts"
	if g.cc.CACert != "" {
		ca = "the CA in --cacert " + g.cc.CACert
	}
	switch {
	case errors.As(err, &unknownCA):
		return refuse(codes.Unauthenticated, err,
			"etcd's certificate at %s is not signed by %s (%v): give --cacert the CA that signed etcd's certificate", addr, ca, unknownCA)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return refuse(codes.Unauthenticated, err,
			"etcd's certificate at %s has expired or is not valid yet (%v): renew etcd's certificate, or set this machine's clock right", addr, invalid)
	case errors.As(err, &hostname):
		return refuse(codes.Unauthenticated, err,
			"etcd's certificate at %s does not name that address (%v): use an endpoint that the certificate names", addr, hostname)
	case errors.As(err, &verify):
		return refuse(codes.Unauthenticated, err,
			"etcd's certificate at %s does not verify (%v): check --cacert and etcd's certificate", addr, verify.Err)
	case errors.As(err, &notTLS):
		return refuse(codes.Unauthenticated, err,
			"etcd at %s does not speak TLS (%v): use http:// without TLS options, or the port of etcd's https listener", addr, err)
	case errors.As(err, &op) && op.Op == "remote error": // an alert from etcd
		if g.cc.Cert == "" {
			return refuse(codes.Unauthenticated, err,
				"etcd at %s refused the TLS connection (%v): it wants a client certificate; give --cert and --key", addr, op.Err)
		}
		return refuse(codes.Unauthenticated, err,
			"etcd at %s refused this client's certificate --cert %s (%v): give a certificate signed by a CA that etcd trusts (its --trusted-ca-file)",
			addr, g.cc.Cert, op.Err)
	}
	return nil
}

type guardedCreds struct {
	credentials.TransportCredentials
	g *tlsGuard
}

func (c *guardedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	addr := raw.RemoteAddr().String()
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		r := c.g.explain(addr, err)
		if r == nil && closedEarly(err) && plainText(ctx, addr) {
			r = refuse(codes.Unauthenticated, err,
				"etcd at %s answers in plain text, not TLS: use http://%s without TLS options, or the port of etcd's https listener", addr, addr)
		}
		if r != nil {
			c.g.record(addr, r)
		}
		return nil, nil, err
	}
	c.g.record(addr, nil)
	return &guardedConn{Conn: conn, g: c.g, addr: addr}, info, nil
}

func (c *guardedCreds) Clone() credentials.TransportCredentials {
	return &guardedCreds{TransportCredentials: c.TransportCredentials.Clone(), g: c.g}
}

// guardedConn hears an alert that etcd sends after the handshake: with TLS
// 1.3 the server checks the client's certificate after the client considers
// the handshake done.
type guardedConn struct {
	net.Conn
	g    *tlsGuard
	addr string
}

// alertWait bounds the read of an alert after a failed write; the
// connection is dead by then, so the read ends at once either way.
const alertWait = 100 * time.Millisecond

func (c *guardedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.note(err)
	return n, err
}

// Write reads the alert when a write fails: a server that refused our
// certificate sends its alert and closes, so the client's next write fails
// (broken pipe) while the reason waits unread.
func (c *guardedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		_ = c.Conn.SetReadDeadline(time.Now().Add(alertWait))
		_, rerr := c.Conn.Read(make([]byte, 1))
		c.note(rerr)
	}
	return n, err
}

func (c *guardedConn) note(err error) {
	if err == nil {
		return
	}
	if r := c.g.explain(c.addr, err); r != nil {
		c.g.record(c.addr, r)
	}
}

// closedEarly is a handshake that the server ended without a word: what a
// plain-text etcd does with a TLS hello, but also what a server that is
// restarting may do.
func closedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// plainText asks addr, over a connection of its own, for etcd's /version
// in plain HTTP: a server that answers it speaks no TLS, which a retry
// cannot mend. A TLS server, or one that is restarting, does not answer in
// HTTP, and the handshake stays one to retry.
func plainText(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: plainProbeWait}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(plainProbeWait))
	if _, err := io.WriteString(conn, "GET /version HTTP/1.0\r\n\r\n"); err != nil {
		return false
	}
	// What arrives before the server closes or the bound ends. Go's TLS
	// servers answer a plain request with a 400 that says they speak TLS:
	// such a server only failed this one handshake.
	b, _ := io.ReadAll(io.LimitReader(conn, 1024))
	return bytes.HasPrefix(b, []byte("HTTP/")) && !bytes.Contains(b, []byte("HTTPS server"))
}

// plainProbeWait bounds the plain-text probe; a server on loopback or a
// LAN answers far sooner.
const plainProbeWait = time.Second
