package etcdconn

import (
	"context"
	"fmt"
	"slices"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdlead/etcdlead/campaign"
)

// refusal is etcd saying no in a way that a retry cannot mend: a
// certificate that does not verify, a wrong password, a missing permission.
// Its message is the one line the user reads, naming the problem and the
// fix. It carries a gRPC status, so campaign.Permanent stops at it, and
// unwraps to etcd's own error, so errors.Is(err, rpctypes.ErrAuthFailed)
// and the like still hold.
type refusal struct {
	code  codes.Code
	msg   string
	cause error
}

func (r *refusal) Error() string              { return r.msg }
func (r *refusal) Unwrap() error              { return r.cause }
func (r *refusal) GRPCStatus() *status.Status { return status.New(r.code, r.msg) }

func refuse(code codes.Code, cause error, format string, args ...any) *refusal {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...), cause: cause}
}

// explainRefusals rewrites etcd's terse refusals of a request into lines
// that name the key and the fix.
func explainRefusals(user string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		switch {
		case isEtcdError(err, rpctypes.ErrGRPCPermissionDenied):
			return denied(user, req, err)
		case user == "" && isEtcdError(err, rpctypes.ErrGRPCUserEmpty):
			return refuse(codes.Unauthenticated, rpctypes.Error(err),
				"etcd has authentication enabled (%v): give --user and a password, or a client certificate whose CN is an etcd user",
				rpctypes.ErrorDesc(err))
		}
		return err
	}
}

// authFailed explains a rejected login. The password's source is named,
// never the password.
func authFailed(user string, err error) *refusal {
	return refuse(codes.Unauthenticated, rpctypes.Error(err),
		"etcd refused user %q (%v): check --user and the password (--password-file, %s, %s or %s=user:password)",
		user, rpctypes.ErrorDesc(err), EnvPassword, EnvEtcdctlPassword, EnvEtcdctlUser)
}

// denied explains a permission error with the key it was about, naming
// every key of its election that a candidate uses (campaign.Layout).
func denied(user string, req any, err error) *refusal {
	who := "this client"
	if user != "" {
		who = fmt.Sprintf("etcd user %q", user)
	}
	if r, ok := req.(*pb.LeaseRevokeRequest); ok {
		return refuse(codes.PermissionDenied, rpctypes.Error(err),
			"permission denied: %s may not revoke lease %x, as its role does not cover the lease's key (%v): the lease will expire by itself",
			who, r.ID, rpctypes.ErrorDesc(err))
	}
	key := requestKey(req)
	if key == "" {
		return refuse(codes.PermissionDenied, rpctypes.Error(err),
			"permission denied: %s may not do this (%v): grant the user a role with readwrite on the election's prefix",
			who, rpctypes.ErrorDesc(err))
	}
	l, ok := campaign.SplitKey(key)
	if !ok {
		return refuse(codes.PermissionDenied, rpctypes.Error(err),
			"permission denied: %s may not use key %q (%v): grant the user a role with readwrite on the election's keys",
			who, key, rpctypes.ErrorDesc(err))
	}
	// The prefixes of run records and health verdicts are used by
	// --run-id and the health checks only: each is named when the refused
	// request used it.
	prefixes := fmt.Sprintf("on prefix %q, on prefix %q, on prefix %q", l.QueuePrefix(), l.SentinelPrefix(), l.RecordPrefix())
	keys := requestKeys(req)
	for _, p := range []string{l.RunsPrefix(), l.HealthPrefix()} {
		if slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, p) }) {
			prefixes += fmt.Sprintf(", on prefix %q", p)
		}
	}
	return refuse(codes.PermissionDenied, rpctypes.Error(err),
		"permission denied: %s may not use key %q (%v): grant the user a role with readwrite %s and on key %q, and read on key %q",
		who, key, rpctypes.ErrorDesc(err), prefixes, l.ResignKey(), l.PauseKey())
}

// requestKeys are the keys a request names: a transaction's in its
// compares, then its operations.
func requestKeys(req any) []string {
	switch r := req.(type) {
	case *pb.RangeRequest:
		return []string{string(r.Key)}
	case *pb.PutRequest:
		return []string{string(r.Key)}
	case *pb.DeleteRangeRequest:
		return []string{string(r.Key)}
	case *pb.TxnRequest:
		var keys []string
		for _, c := range r.Compare {
			keys = append(keys, string(c.Key))
		}
		for _, op := range append(r.Success, r.Failure...) {
			switch {
			case op.GetRequestPut() != nil:
				keys = append(keys, string(op.GetRequestPut().Key))
			case op.GetRequestRange() != nil:
				keys = append(keys, string(op.GetRequestRange().Key))
			case op.GetRequestDeleteRange() != nil:
				keys = append(keys, string(op.GetRequestDeleteRange().Key))
			}
		}
		return keys
	}
	return nil
}

// requestKey is the first key a request names, or "".
func requestKey(req any) string {
	if keys := requestKeys(req); len(keys) > 0 {
		return keys[0]
	}
	return ""
}

func isEtcdError(err, target error) bool {
	return err != nil && rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(target)
}
