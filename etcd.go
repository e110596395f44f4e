package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// keepAliveTime is etcd's smallest accepted gRPC ping interval (its
// --grpc-keepalive-min-time); pinging more often gets the connection closed.
// The pings let a blackholed connection be noticed and redialled.
const (
	keepAliveTime    = 5 * time.Second
	keepAliveTimeout = 3 * time.Second
)

func newClient(cc connConfig) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:            cc.endpoints,
		DialTimeout:          cc.dialTimeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		PermitWithoutStream:  true,
		Username:             cc.user,
		Password:             cc.password,
		// The client's own logs would duplicate ours, at best.
		Logger: zap.NewNop(),
	}
	tlsCfg, err := tlsConfig(cc)
	if err != nil {
		return nil, err
	}
	cfg.TLS = tlsCfg
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}

func tlsConfig(cc connConfig) (*tls.Config, error) {
	if cc.caCert == "" && cc.cert == "" && !cc.insecureTLS {
		return nil, nil
	}
	for _, f := range []string{cc.caCert, cc.cert, cc.key} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("TLS file: %v", err)
		}
	}
	info := transport.TLSInfo{TrustedCAFile: cc.caCert, CertFile: cc.cert, KeyFile: cc.key, InsecureSkipVerify: cc.insecureTLS}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("TLS configuration: %v", err)
	}
	return cfg, nil
}

func newLogger(level string, json bool) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "etcdlead",
		Level:      hclog.LevelFromString(level),
		JSONFormat: json,
		Output:     os.Stderr,
	})
}
