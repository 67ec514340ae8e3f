package server

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// tlsStream is a raft.StreamLayer over mutual TLS: Config.RaftTLS both
// accepts (it should require and verify client certificates) and dials
// (its RootCAs verify the other node, its Certificates identify this one).
// A node without a certificate from the cluster's CA can neither send Raft
// traffic here nor receive any from here.
type tlsStream struct {
	net.Listener
	advertise net.Addr
	cfg       *tls.Config
}

func newTLSStream(addr string, advertise net.Addr, cfg *tls.Config) (*tlsStream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &tlsStream{Listener: tls.NewListener(ln, cfg), advertise: advertise, cfg: cfg}, nil
}

// Dial connects to another node's Raft port and completes the handshake.
func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.cfg)
}

// Addr is the address other nodes dial.
func (s *tlsStream) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.Listener.Addr()
}
