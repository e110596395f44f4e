package etcdconn

import (
	"context"
	"errors"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// Unreached is a request that ended with its context while no connection
// to etcd could be made. Its message says why, from gRPC's last connection
// error: "connection refused at 127.0.0.1:2379", a name that did not
// resolve, a server that does not speak etcd's protocol. Without it the
// client reports only "context deadline exceeded", whatever went wrong.
// It unwraps to the context's error, so errors.Is(err,
// context.DeadlineExceeded) still holds; or, for a request ended at once
// because every endpoint refused before etcd ever answered (firstContact),
// to syscall.ECONNREFUSED.
type Unreached struct {
	Cause string
	err   error
}

func (u *Unreached) Error() string { return u.Cause }
func (u *Unreached) Unwrap() error { return u.err }

// nameCause keeps gRPC's last connection error when a request's context
// ends: the client library would replace the whole error by the context's.
// The result carries no gRPC status, so the library passes it on as it is.
func nameCause(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil || ctx.Err() == nil {
		return err
	}
	s, ok := status.FromError(err)
	if !ok || (s.Code() != codes.DeadlineExceeded && s.Code() != codes.Canceled) {
		return err
	}
	if cause := connCause(s.Message()); cause != "" {
		return &Unreached{Cause: cause, err: ctx.Err()}
	}
	return err
}

// The expressions are compiled on first use, not at every start: they are
// needed only when etcd cannot be reached.
var (
	refusedAt  = lazyRegexp(`dial tcp ([^ ]+): connect: connection refused`)
	timedOutAt = lazyRegexp(`dial tcp ([^ ]+): (?:connect: )?i/o timeout`)
	lookup     = lazyRegexp(`lookup ([^ ]+)(?: on [^ ]+)?: (.+)$`)
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// connCause words the connection error in a gRPC status message, or
// returns "" when there is none.
func connCause(msg string) string {
	_, last, ok := strings.Cut(msg, "latest balancer error: ")
	if !ok {
		return ""
	}
	last = strings.TrimPrefix(last, "connection error: desc = ")
	last = strings.Trim(last, `"`)
	last = strings.TrimPrefix(last, "transport: Error while dialing: ")
	if m := refusedAt().FindStringSubmatch(last); m != nil {
		return "connection refused at " + m[1] + ": is etcd running, and listening on that port?"
	}
	if m := timedOutAt().FindStringSubmatch(last); m != nil {
		return "no answer from " + m[1] + " (connect timed out): is a firewall dropping it?"
	}
	if m := lookup().FindStringSubmatch(last); m != nil {
		return "name " + m[1] + " not resolved (" + m[2] + ")"
	}
	if strings.Contains(last, "looked like an HTTP/1.1 header") {
		return "the server answered in HTTP/1.1, not in etcd's gRPC: check the endpoint's port"
	}
	if h, ok := strings.CutPrefix(last, "transport: authentication handshake failed: "); ok {
		return "TLS handshake failed: " + h
	}
	return strings.TrimPrefix(last, "transport: ")
}

// firstContact ends a request at once when, before etcd ever answered this
// client, no endpoint accepts a connection: a port that nothing listens on
// (a typo, etcd not started) is refused at once, so waiting out the
// request's bound (--dial-timeout) would only delay the same news.
//
// Once etcd has answered, a refused connection is an etcd restarting, and
// requests wait for it as before: a leader's renewals wait until its fence
// point (campaign), never less.
type firstContact struct {
	addrs   []string // host:port of each endpoint
	reached atomic.Bool
}

func newFirstContact(endpoints []string) *firstContact {
	f := &firstContact{}
	for _, e := range endpoints {
		if u, err := url.Parse(e); err == nil && strings.Contains(e, "://") {
			e = u.Host
		}
		f.addrs = append(f.addrs, e)
	}
	return f
}

func (f *firstContact) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if f.reached.Load() {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go f.watch(ctx, cc, cancel)
	err := invoker(ctx, method, req, reply, cc, opts...)
	var u *Unreached
	switch {
	case err == nil:
		f.reached.Store(true)
	case errors.As(context.Cause(ctx), &u) && errors.Is(u, syscall.ECONNREFUSED):
		return u
	default:
		if s, ok := status.FromError(err); ok && s.Code() != codes.Unavailable && s.Code() != codes.DeadlineExceeded && s.Code() != codes.Canceled {
			f.reached.Store(true) // etcd's own answer, a refusal of the request
		}
	}
	return err
}

// watch ends the request, through cancel, once the connection has failed
// and every endpoint refuses a connection of the watch's own. It ends with
// ctx, or once a connection is made.
func (f *firstContact) watch(ctx context.Context, cc *grpc.ClientConn, cancel context.CancelCauseFunc) {
	for s := cc.GetState(); s != connectivity.Ready && s != connectivity.Shutdown; s = cc.GetState() {
		if s == connectivity.TransientFailure {
			if refused := f.refused(ctx); refused != nil {
				cancel(refused)
				return
			}
		}
		if !cc.WaitForStateChange(ctx, s) {
			return
		}
	}
}

// refused dials every endpoint; if each refuses, it says so. A dial that
// connects, times out or fails otherwise leaves the request waiting.
func (f *firstContact) refused(ctx context.Context) *Unreached {
	for _, addr := range f.addrs {
		d := net.Dialer{Timeout: plainProbeWait}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil
		}
	}
	return &Unreached{
		Cause: "connection refused at " + strings.Join(f.addrs, ", ") + ": is etcd running, and listening on that port?",
		err:   syscall.ECONNREFUSED,
	}
}
