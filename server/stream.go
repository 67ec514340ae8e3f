package server

import (
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// A node whose RaftAdvertise is a name (fencer-0.fencer:7380) puts the name,
// not an address it resolved once, into the cluster's configuration: the
// others resolve it at every dial, so a node that comes back at another IP
// (a Kubernetes pod rescheduled) is still reached. raft's TCP transport
// advertises only a resolved *net.TCPAddr, hence this stream layer.

// nameAddr is an advertised host:port whose host is a name.
type nameAddr string

func (a nameAddr) Network() string { return "tcp" }
func (a nameAddr) String() string  { return string(a) }

// advertisedName returns adv as a nameAddr if its host is a name rather
// than an IP address.
func advertisedName(adv string) (nameAddr, bool) {
	host, _, err := net.SplitHostPort(adv)
	if err != nil || host == "" || net.ParseIP(host) != nil {
		return "", false
	}
	return nameAddr(adv), true
}

// tcpStream is a plain-TCP raft.StreamLayer (that may advertise a name).
type tcpStream struct {
	net.Listener
	advertise net.Addr
}

func newTCPStream(addr string, advertise net.Addr) (*tcpStream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &tcpStream{Listener: ln, advertise: advertise}, nil
}

// Dial connects to another node's Raft port, resolving a name anew.
func (s *tcpStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// Addr is the address other nodes dial: the advertised one, else the
// listener's.
func (s *tcpStream) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.Listener.Addr()
}
