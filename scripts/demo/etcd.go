package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// electionPrefix is where etcdlead keeps the candidates of --election=demo
// under the default --prefix.
const electionPrefix = "etcdlead/demo/"

// startEtcd runs a single-member etcd inside the demo, so that a machine
// with only Go on it needs no etcd install.
// The returned stop closes it.
func startEtcd(ctx context.Context, con *console, dir string) (stop func(), endpoint string, err error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, "", err
	}
	client := url.URL{Scheme: "http", Host: ports[0]}
	peer := url.URL{Scheme: "http", Host: ports[1]}
	cfg := embed.NewConfig()
	cfg.Name = "demo"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Errors only, and under their own name: etcd's info logs would bury the
	// election, but a failing etcd must still say why.
	cfg.LogLevel = "error"
	enc := zapcore.NewConsoleEncoder(zapcore.EncoderConfig{MessageKey: "msg", LevelKey: "level",
		EncodeLevel: zapcore.CapitalLevelEncoder})
	level := zap.NewAtomicLevelAt(zapcore.ErrorLevel)
	core := zapcore.NewCore(enc, zapcore.AddSync(con.writer("etcd")), level)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(core))

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return func() {
			// A closing etcd logs its listeners' "server closed" as errors.
			level.SetLevel(zapcore.FatalLevel)
			e.Close()
		}, ports[0], nil
	case err = <-e.Err():
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("not ready within 30s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	e.Close()
	return nil, "", fmt.Errorf("start etcd: %v", err)
}

// freePorts asks the kernel for loopback ports that are free now; all are
// held open together so that no two are the same.
func freePorts(n int) ([]string, error) {
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %v", err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

func newClient(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

type seat struct {
	id  string // the key's value: the candidate's --id
	rev int64  // the key's create revision: its fencing token once it leads
}

// electionQueue reads the election from etcd itself: the key with the lowest
// create revision leads (what concurrency.Election.Leader returns), and
// the others follow in that order.
func electionQueue(ctx context.Context, cli *clientv3.Client) ([]seat, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, electionPrefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("read the election from etcd: %v", err)
	}
	var q []seat
	for _, kv := range resp.Kvs {
		q = append(q, seat{id: string(kv.Value), rev: kv.CreateRevision})
	}
	return q, nil
}

func (q seat) String() string { return fmt.Sprintf("%s (rev %d)", q.id, q.rev) }

func describe(q []seat) string {
	if len(q) == 0 {
		return "no candidate"
	}
	s := "leader " + q[0].String()
	if len(q) > 1 {
		var rest []string
		for _, x := range q[1:] {
			rest = append(rest, x.String())
		}
		s += ", then " + strings.Join(rest, ", ")
	}
	return s
}
