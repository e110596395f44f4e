package campaign

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Reasons a term ends without a stop request.
var (
	ErrKeyDeleted = errors.New("key deleted")
	// ErrKeyReplaced is a term's key put again under another lease (or
	// none) by someone else: it no longer goes with the term's lease.
	ErrKeyReplaced = errors.New("key replaced")
	ErrLeaseLost   = errors.New("lease lost")
	// ErrNotLeader is returned when the caller's context ended while another
	// candidate still led.
	ErrNotLeader = errors.New("another candidate leads")
	// ErrUnreachable is returned when the caller's context ended while the
	// last request to etcd had failed or gone unanswered.
	ErrUnreachable = errors.New("etcd unreachable")
	// ErrResigned is an operator's request to step down (etcdlead resign).
	ErrResigned = errors.New("resign requested")
)

// Permanent reports errors that a retry cannot mend: credentials and
// permissions. A daemon retries everything else for ever.
func Permanent(err error) bool {
	for _, e := range []error{rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed,
		rpctypes.ErrUserEmpty, rpctypes.ErrAuthNotEnabled, rpctypes.ErrInvalidAuthMgmt} {
		if errors.Is(err, e) {
			return true
		}
	}
	if s, ok := status.FromError(errors.Unwrap(err)); ok && s != nil {
		return s.Code() == codes.PermissionDenied || s.Code() == codes.Unauthenticated
	}
	if s, ok := status.FromError(err); ok && s != nil {
		return s.Code() == codes.PermissionDenied || s.Code() == codes.Unauthenticated
	}
	return false
}
