// Package testca makes a certificate authority and its certificates for one
// test: the TLS tests of the server, the bridge, the client, both commands
// and the integration tests share it.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// CA is a certificate authority valid for an hour either side of now.
type CA struct {
	Cert *x509.Certificate
	Pool *x509.CertPool // holds Cert alone
	PEM  []byte         // Cert, PEM-encoded
	key  *ecdsa.PrivateKey
}

// New makes a CA named name.
func New(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, Pool: pool, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Issue makes a certificate named name for 127.0.0.1 and the DNS name
// "fencer.test", for servers and clients alike (as a node's: it serves and
// dials other nodes).
func (ca *CA) Issue(t testing.TB, name string) tls.Certificate {
	t.Helper()
	der, key := ca.sign(t, name, true, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// IssuePEM is Issue as PEM files' contents: the certificate and its PKCS #8
// key.
func (ca *CA) IssuePEM(t testing.TB, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	der, key := ca.sign(t, name, true, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// IssueClient makes a certificate for client authentication only, with no
// addresses: what an application gets, not a node.
func (ca *CA) IssueClient(t testing.TB, name string) tls.Certificate {
	t.Helper()
	der, key := ca.sign(t, name, false, x509.ExtKeyUsageClientAuth)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca *CA) sign(t testing.TB, name string, addrs bool, usage ...x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage}
	if addrs {
		tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"fencer.test", "localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
