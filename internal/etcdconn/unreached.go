package etcdconn

import (
	"context"
	"regexp"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Unreached is a request that ended with its context while no connection
// to etcd could be made. Its message says why, from gRPC's last connection
// error: "connection refused at 127.0.0.1:2379", a name that did not
// resolve, a server that does not speak etcd's protocol. Without it the
// client reports only "context deadline exceeded", whatever went wrong.
// It unwraps to the context's error, so errors.Is(err,
// context.DeadlineExceeded) still holds.
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
