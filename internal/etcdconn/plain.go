package etcdconn

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
)

// plainCreds is plain text that notices a TLS listener at the other end.
//
// A TLS server reads the client's HTTP/2 preface as a broken TLS record and
// closes the connection without a word; gRPC takes that for an unreachable
// server and redials for ever ("error reading server preface: EOF"). So the
// first read of each connection is watched: a connection that ends before
// the server said anything is probed, over a connection of its own, for a
// TLS handshake, and a server that completes one is refused through the
// guard, as a TLS endpoint that answers in plain text is (tls.go).
type plainCreds struct {
	credentials.TransportCredentials
	g *tlsGuard
}

func (c *plainCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	return &plainConn{Conn: conn, g: c.g, addr: raw.RemoteAddr().String()}, info, nil
}

func (c *plainCreds) Clone() credentials.TransportCredentials {
	return &plainCreds{TransportCredentials: c.TransportCredentials.Clone(), g: c.g}
}

// plainConn judges its server by the outcome of the first read: an answer
// accepts it; an end without one asks whether it speaks TLS.
type plainConn struct {
	net.Conn
	g     *tlsGuard
	addr  string
	first sync.Once
}

func (c *plainConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 || err != nil {
		c.first.Do(func() {
			switch {
			case n > 0:
				c.g.record(c.addr, nil)
			case closedEarly(err) && speaksTLS(c.addr):
				c.g.record(c.addr, refuse(codes.Unauthenticated, err,
					"etcd at %s speaks TLS, not plain text: use https://%s, with --cacert naming the CA that signed etcd's certificate unless this machine trusts it",
					c.addr, c.addr))
			}
		})
	}
	return n, err
}

// speaksTLS tells whether addr completes a TLS handshake, or ends one with
// a TLS alert (a server that wants a client certificate). Nothing is sent
// over it, so its certificate need not be verified: the probe asks which
// protocol the server speaks, not whom to trust.
func speaksTLS(addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), plainProbeWait)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}
