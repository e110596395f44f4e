package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Authority is a certificate authority that lives for one test.
type Authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// Options describes a certificate that an Authority issues.
type Options struct {
	// CommonName is the subject's name; etcd takes a client certificate's
	// CommonName as the user name when auth is on and no token is given.
	CommonName string
	// Server makes a certificate for 127.0.0.1 and localhost, usable by a
	// server; otherwise it is a client certificate.
	Server bool
	// NotBefore and NotAfter default to an hour ago and a day ahead.
	NotBefore, NotAfter time.Time
}

// NewAuthority creates a self-signed CA.
func NewAuthority(tb testing.TB, name string) *Authority {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"etcdlead tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("testcert: CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("testcert: CA: %v", err)
	}
	return &Authority{cert: cert, key: key, pem: pemBlock("CERTIFICATE", der)}
}

// WriteCA writes the CA certificate to dir/name and returns its path.
func (a *Authority) WriteCA(tb testing.TB, dir, name string) string {
	tb.Helper()
	return write(tb, filepath.Join(dir, name), a.pem)
}

// Issue signs a new certificate and writes it and its key to
// dir/name.pem and dir/name-key.pem, returning both paths.
func (a *Authority) Issue(tb testing.TB, dir, name string, o Options) (certFile, keyFile string) {
	tb.Helper()
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb),
		Subject:      pkix.Name{CommonName: o.CommonName, Organization: []string{"etcdlead tests"}},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if o.Server {
		// etcd also dials its own client URLs, so a server certificate
		// serves for both ends.
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		tb.Fatalf("testcert: %s: %v", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("testcert: %s: %v", name, err)
	}
	certFile = write(tb, filepath.Join(dir, name+".pem"), pemBlock("CERTIFICATE", der))
	keyFile = write(tb, filepath.Join(dir, name+"-key.pem"), pemBlock("PRIVATE KEY", keyDER))
	return certFile, keyFile
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("testcert: key: %v", err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		tb.Fatalf("testcert: serial: %v", err)
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func write(tb testing.TB, path string, b []byte) string {
	tb.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatalf("testcert: %v", err)
	}
	return path
}
