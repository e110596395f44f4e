package etcdtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TLS is the server side of a member started by StartTLS.
type TLS struct {
	// CertFile and KeyFile are the server's certificate and key.
	CertFile, KeyFile string
	// ClientCAFile, when set, makes etcd require a client certificate
	// signed by it on the https endpoint (--client-cert-auth).
	ClientCAFile string
}

// StartTLS starts a one-member cluster that serves clients over https on an
// endpoint of its own, which it returns ("https://127.0.0.1:PORT"). The
// member also listens on a plain address, which ClientAddr, Client and the
// readiness check use, so a test can set etcd up (users, roles) whatever it
// makes the https side demand. opts.Members must be 0 or 1.
func StartTLS(tb testing.TB, opts Options, t TLS) (*Cluster, string) {
	tb.Helper()
	if opts.Members > 1 {
		tb.Fatalf("etcdtest: StartTLS starts one member, not %d", opts.Members)
	}
	bin := EtcdBinary(tb)
	base := opts.DataDir
	if base == "" {
		base = tb.TempDir()
	}
	c := &Cluster{}
	tb.Cleanup(c.destroy)
	var endpoint string
	c.startWithRetries(tb, "a TLS member", func() error {
		var err error
		endpoint, err = c.tryStartTLS(bin, base, opts.ExtraArgs, t)
		return err
	})
	return c, endpoint
}

func (c *Cluster) tryStartTLS(bin, base string, extraArgs []string, t TLS) (string, error) {
	ports, err := freePorts(3)
	if err != nil {
		return "", err
	}
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	m := &Member{
		name:       "member-0",
		clientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		dataDir:    filepath.Join(base, "member-0"),
		logPath:    filepath.Join(base, "member-0.log"),
		bin:        bin,
	}
	if _, err := os.Stat(m.dataDir); err == nil {
		return "", fmt.Errorf("data directory %s already exists", m.dataDir)
	}
	c.mu.Lock()
	c.members = []*Member{m}
	c.mu.Unlock()

	plain := "http://" + m.clientAddr
	secure := fmt.Sprintf("https://127.0.0.1:%d", ports[1])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2])
	m.args = []string{
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", plain + "," + secure,
		"--advertise-client-urls", plain,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", m.name + "=" + peer,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "etcdtest-" + hex.EncodeToString(token),
		"--log-level", "error",
		"--unsafe-no-fsync",
		"--cert-file", t.CertFile,
		"--key-file", t.KeyFile,
	}
	if t.ClientCAFile != "" {
		m.args = append(m.args, "--client-cert-auth", "--trusted-ca-file", t.ClientCAFile)
	}
	m.args = append(m.args, extraArgs...)
	if err := m.start(); err != nil {
		return "", err
	}
	return secure, waitServing([]*Member{m})
}
