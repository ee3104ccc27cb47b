package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// testPKI is a self-signed certificate for 127.0.0.1 and localhost, made
// once per test binary, and a pool that trusts it.
var testPKI = sync.OnceValues(func() (*tls.Config, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "httpretry e2e"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}, pool
})

// h2Base returns a pooled transport that trusts testPKI and speaks HTTP/2;
// its idle connections are closed when the test ends.
func h2Base(t testing.TB) *http.Transport {
	_, pool := testPKI()
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// oneConn is a Base of exactly one HTTP/2 connection (http.ClientConn, Go
// 1.26): unlike a Transport it has no pool and no retry loop of its own, so
// every stream error reaches the layer above it as net/http reports it.
type oneConn struct{ cc *http.ClientConn }

func (c oneConn) RoundTrip(req *http.Request) (*http.Response, error) { return c.cc.RoundTrip(req) }

func newOneConn(t testing.TB, addr string) oneConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cc, err := h2Base(t).NewClientConn(ctx, "https", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return oneConn{cc}
}

// h2StreamError has the fields of net/http's HTTP/2 stream error, whose As
// method fills any struct of that shape.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (h2StreamError) Error() string { return "http2 stream error" }

const refusedStream = 0x7
