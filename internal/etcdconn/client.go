package etcdconn

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Config is how to reach etcd and who to be there.
type Config struct {
	Endpoints   []string // host:port, http://host:port or https://host:port
	DialTimeout time.Duration
	CACert      string // CA bundle file; "" for the system's CAs
	Cert, Key   string // client certificate and key files
	InsecureTLS bool
	User        string
	Password    string
	// AuthDisabled, if set, is called once when etcd turns out to have
	// authentication disabled although a user was given: the user then
	// stands for nothing, which an operator should hear.
	AuthDisabled func()
}

// The variables a password may come from, named in the refusals so the
// user knows where to look; the CLI reads them.
const (
	EnvPassword        = "ETCDLEAD_PASSWORD"
	EnvEtcdctlPassword = "ETCDCTL_PASSWORD"
	EnvEtcdctlUser     = "ETCDCTL_USER"
)

// keepAliveTime is etcd's smallest accepted gRPC ping interval (its
// --grpc-keepalive-min-time); pinging more often gets the connection closed.
// The pings let a blackholed connection be noticed and redialled.
const (
	keepAliveTime    = 5 * time.Second
	keepAliveTimeout = 3 * time.Second
)

// windowSize is the HTTP/2 flow-control window of each stream and of the
// connection. Setting it turns off gRPC's bandwidth estimation, which pings
// etcd whenever an answer arrives: at every renewal the ping's answer woke
// an idle supervisor a second time, for a window that etcdlead's small
// messages never fill.
const windowSize = 1 << 20

// New returns a client that has not talked to etcd yet: it fails only
// on bad configuration, never because etcd is unreachable, so the campaign
// loop decides what an outage means. Refusals that a retry cannot mend (a
// certificate that does not verify, a wrong password, a missing permission)
// come back from requests as errors that campaign.Permanent recognises,
// with one line that names the fix.
func New(cc Config) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:            cc.Endpoints,
		DialTimeout:          cc.DialTimeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		PermitWithoutStream:  true,
		// The client's own logs would duplicate ours, at best.
		Logger: zap.NewNop(),
	}
	if err := CheckEndpoints(cc.Endpoints); err != nil {
		return nil, err
	}
	unary := []grpc.UnaryClientInterceptor{newFirstContact(cc.Endpoints).unary, nameCause}
	var stream []grpc.StreamClientInterceptor
	tlsCfg, err := tlsConfig(cc)
	if err != nil {
		return nil, err
	}
	g := newTLSGuard(cc)
	creds := credentials.TransportCredentials(&plainCreds{TransportCredentials: insecure.NewCredentials(), g: g})
	if tlsCfg != nil {
		creds = g.creds(credentials.NewTLS(tlsCfg))
	}
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithTransportCredentials(creds))
	unary = append(unary, g.unary)
	stream = append(stream, g.stream)
	if cc.User != "" {
		if cc.Password == "" {
			return nil, fmt.Errorf("user %q has no password: give --password-file, set %s or %s, or use --user user:password",
				cc.User, EnvPassword, EnvEtcdctlPassword)
		}
		a := newTokenAuth(cc.User, cc.Password, cc.AuthDisabled)
		unary = append(unary, a.unary)
		stream = append(stream, a.stream)
	}
	unary = append(unary, explainRefusals(cc.User))
	cfg.DialOptions = append(cfg.DialOptions,
		grpc.WithInitialWindowSize(windowSize), grpc.WithInitialConnWindowSize(windowSize),
		grpc.WithChainUnaryInterceptor(unary...), grpc.WithChainStreamInterceptor(stream...))
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}

// CheckEndpoints refuses credentials in an endpoint URL: they would reach
// the logs and, through ETCDLEAD_ENDPOINTS, the child. The message shows the
// URL with its password masked.
func CheckEndpoints(endpoints []string) error {
	for _, e := range endpoints {
		if u, err := url.Parse(e); err == nil && u.User != nil {
			return fmt.Errorf("endpoint %s holds credentials: drop them from the URL and give --user and --password-file", u.Redacted())
		}
	}
	return nil
}

// tlsConfig is nil when etcd is reached in plain text. It checks what can be
// checked before dialling, so a bad file or an expired client certificate
// is named at once.
func tlsConfig(cc Config) (*tls.Config, error) {
	https := false
	for _, e := range cc.Endpoints {
		https = https || strings.HasPrefix(e, "https://")
	}
	given := cc.CACert != "" || cc.Cert != "" || cc.InsecureTLS
	if !https && !given {
		return nil, nil
	}
	for _, e := range cc.Endpoints {
		if strings.HasPrefix(e, "http://") {
			return nil, fmt.Errorf("endpoint %s is plain http, but TLS is asked for: use https://%s", e, strings.TrimPrefix(e, "http://"))
		}
	}
	if cc.CACert != "" {
		if err := checkCA(cc.CACert); err != nil {
			return nil, err
		}
	}
	if cc.Cert != "" {
		if err := checkClientCert(cc.Cert, cc.Key, time.Now()); err != nil {
			return nil, err
		}
	}
	info := transport.TLSInfo{TrustedCAFile: cc.CACert, CertFile: cc.Cert, KeyFile: cc.Key, InsecureSkipVerify: cc.InsecureTLS}
	if !given {
		return &tls.Config{MinVersion: tls.VersionTLS12}, nil // the system's CAs
	}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("TLS configuration: %v", err)
	}
	return cfg, nil
}

func checkCA(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--cacert: %v", pathErr(err))
	}
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return fmt.Errorf("--cacert %s holds no PEM certificate: give the CA certificate that signed etcd's", file)
		}
		if block.Type == "CERTIFICATE" {
			if _, err := x509.ParseCertificate(block.Bytes); err != nil {
				return fmt.Errorf("--cacert %s: %v", file, err)
			}
			return nil
		}
	}
}

// checkClientCert loads the pair as the TLS stack will, and refuses a
// certificate outside its validity period: etcd would refuse it anyway,
// with a less helpful alert.
func checkClientCert(certFile, keyFile string, now time.Time) error {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("--cert %s and --key %s: %v: give a PEM certificate and the key that belongs to it", certFile, keyFile, pathErr(err))
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("--cert %s: %v", certFile, err)
	}
	const layout = "2006-01-02 15:04:05 MST"
	switch {
	case now.After(leaf.NotAfter):
		return fmt.Errorf("client certificate --cert %s expired at %s: renew it", certFile, leaf.NotAfter.UTC().Format(layout))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("client certificate --cert %s is not valid before %s: check this machine's clock", certFile, leaf.NotBefore.UTC().Format(layout))
	}
	return nil
}

// pathErr drops the operation from a file error: "open x: no such file"
// reads as "x: no such file".
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}
