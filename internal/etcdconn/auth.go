package etcdconn

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

const authenticateMethod = "/etcdserverpb.Auth/Authenticate"

// tokenAuth logs in to etcd when a request first needs a token, not when
// the client is made, and keeps the token until etcd rejects it.
//
// clientv3 does it otherwise, for two reasons that matter here: with a user
// it logs in inside clientv3.New, which fails when etcd is unreachable, so a
// daemon started during an etcd outage would exit instead of waiting; and
// it logs in again for every new stream, and every lease renewal opens one,
// so each renewal would cost etcd a bcrypt hash and a raft write.
type tokenAuth struct {
	user, password string
	login          chan struct{} // one login at a time
	off            sync.Once     // calls authDisabled once
	authDisabled   func()

	mu    sync.Mutex
	token string
	state authState
}

type authState int

const (
	authUnknown authState = iota // log in before the next request
	authToken                    // send token
	authOff                      // etcd has auth disabled: send nothing
)

func newTokenAuth(user, password string, authDisabled func()) *tokenAuth {
	return &tokenAuth{user: user, password: password, login: make(chan struct{}, 1), authDisabled: authDisabled}
}

func (a *tokenAuth) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == authenticateMethod {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	for retried := false; ; retried = true {
		tctx, tok, err := a.attach(ctx, cc)
		if err != nil {
			return err
		}
		err = invoker(tctx, method, req, reply, cc, opts...)
		if !a.rejected(err, tok) || retried {
			return err
		}
	}
}

func (a *tokenAuth) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	tctx, tok, err := a.attach(ctx, cc)
	if err != nil {
		return nil, err
	}
	s, err := streamer(tctx, desc, cc, method, opts...)
	if err != nil {
		a.rejected(err, tok)
		return nil, err
	}
	return &tokenStream{ClientStream: s, a: a, tok: tok}, nil
}

// tokenStream notices a token that etcd rejects on a stream, so the next
// request logs in again.
type tokenStream struct {
	grpc.ClientStream
	a   *tokenAuth
	tok string
}

func (s *tokenStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	s.a.rejected(err, s.tok)
	return err
}

// attach returns ctx carrying the token, logging in first if needed.
func (a *tokenAuth) attach(ctx context.Context, cc *grpc.ClientConn) (context.Context, string, error) {
	tok, state := a.current()
	if state == authUnknown {
		var err error
		if tok, state, err = a.authenticate(ctx, cc); err != nil {
			return nil, "", err
		}
	}
	if state == authOff {
		return ctx, "", nil
	}
	return metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, tok), tok, nil
}

func (a *tokenAuth) current() (string, authState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token, a.state
}

func (a *tokenAuth) authenticate(ctx context.Context, cc *grpc.ClientConn) (string, authState, error) {
	select {
	case a.login <- struct{}{}:
		defer func() { <-a.login }()
	case <-ctx.Done():
		return "", authUnknown, ctx.Err()
	}
	if tok, state := a.current(); state != authUnknown {
		return tok, state, nil // another request logged in meanwhile
	}
	resp, err := pb.NewAuthClient(cc).Authenticate(ctx,
		&pb.AuthenticateRequest{Name: a.user, Password: a.password}, grpc.WaitForReady(true))
	if isEtcdError(err, rpctypes.ErrGRPCAuthNotEnabled) && a.authDisabled != nil {
		a.off.Do(a.authDisabled)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case isEtcdError(err, rpctypes.ErrGRPCAuthNotEnabled):
		a.state = authOff
	case isEtcdError(err, rpctypes.ErrGRPCAuthFailed):
		return "", authUnknown, authFailed(a.user, err)
	case err != nil:
		return "", authUnknown, err // unreachable, or refused over TLS
	default:
		a.token, a.state = resp.Token, authToken
	}
	return a.token, a.state, nil
}

// rejected reports whether err says the token tok is no good (expired,
// issued before the auth data changed, or missing because etcd enabled auth
// after the first login), and if so forgets it.
func (a *tokenAuth) rejected(err error, tok string) bool {
	if !isEtcdError(err, rpctypes.ErrGRPCInvalidAuthToken) && !isEtcdError(err, rpctypes.ErrGRPCAuthOldRevision) &&
		!isEtcdError(err, rpctypes.ErrGRPCUserEmpty) {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == tok {
		a.token, a.state = "", authUnknown
	}
	return true
}
