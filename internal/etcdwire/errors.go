package etcdwire

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Refused reports an answer that a retry cannot change: etcd refused the
// credentials or the permission. etcd says so in two forms, its own
// errors and plain gRPC statuses, wrapped or not.
func Refused(err error) bool {
	for _, e := range []error{rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed,
		rpctypes.ErrUserEmpty, rpctypes.ErrAuthNotEnabled, rpctypes.ErrInvalidAuthMgmt} {
		if errors.Is(err, e) {
			return true
		}
	}
	for _, e := range []error{errors.Unwrap(err), err} {
		if s, ok := status.FromError(e); ok && s != nil {
			return s.Code() == codes.PermissionDenied || s.Code() == codes.Unauthenticated
		}
	}
	return false
}
