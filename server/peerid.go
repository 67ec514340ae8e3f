package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Every Raft connection says whom it is for. hashicorp/raft credits a vote
// or an acknowledgement to the server it meant to ask, whoever answered at
// that server's address: an address that reaches another member (a name
// that still resolves to an IP another pod now has, a reused IP) would
// count that member twice, and two servers could then make a majority of
// five (docs/safety.md, "Which server answers"). So the dialer writes, first
// on each connection, a preamble holding the ID of the server it means and
// the ID of its cluster (if it has applied one), and the acceptor closes a
// connection meant for another server or another cluster before reading any
// RPC. With --raft-tls the preamble travels inside TLS.
//
// The ID raft means is known only where raft calls the transport (every
// outbound call carries it); the stream layer sees an address. idTransport
// therefore hands the stream an address tagged with the ID (taggedAddr),
// which idStream.Dial takes apart again; the connection pool is then one per
// ID and address.

// preambleMagic opens the preamble. Its first byte is no raft RPC type, so
// a connection from a server without the preamble (an older fencer) is told
// apart and refused.
var preambleMagic = [4]byte{0xfe, 'F', 'R', '1'}

// maxPreambleField bounds each field of the preamble.
const maxPreambleField = 512

// preambleTimeout bounds reading a connection's preamble.
const preambleTimeout = 10 * time.Second

// errPeerIdentity is why an accepted connection was closed.
var errPeerIdentity = errors.New("server: raft connection refused")

// taggedAddr tags addr with the ID of the server it is meant to reach.
func taggedAddr(id raft.ServerID, addr raft.ServerAddress) raft.ServerAddress {
	return raft.ServerAddress(string(addr) + " (id " + strconv.Quote(string(id)) + ")")
}

// untag returns the address and server ID taggedAddr put together; a
// plain address gives an empty ID.
func untag(a raft.ServerAddress) (addr, id string) {
	s := string(a)
	i := strings.Index(s, " (id ")
	if i < 0 || !strings.HasSuffix(s, ")") {
		return s, ""
	}
	q, err := strconv.Unquote(s[i+len(" (id ") : len(s)-1])
	if err != nil {
		return s, ""
	}
	return s[:i], q
}

// idTransport tags the target of every outbound RPC with its server ID.
type idTransport struct {
	raft.Transport
}

func (t idTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	return t.Transport.AppendEntriesPipeline(id, taggedAddr(id, target))
}

func (t idTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.Transport.AppendEntries(id, taggedAddr(id, target), args, resp)
}

func (t idTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.Transport.RequestVote(id, taggedAddr(id, target), args, resp)
}

func (t idTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.Transport.InstallSnapshot(id, taggedAddr(id, target), args, resp, data)
}

func (t idTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.Transport.TimeoutNow(id, taggedAddr(id, target), args, resp)
}

// RequestPreVote forwards a pre-vote, tagged, so that Raft keeps pre-voting.
func (t idTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	pv, ok := t.Transport.(raft.WithPreVote)
	if !ok {
		return errors.New("server: the transport does not pre-vote")
	}
	return pv.RequestPreVote(id, taggedAddr(id, target), args, resp)
}

// Close closes the inner transport.
func (t idTransport) Close() error {
	if c, ok := t.Transport.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// idStream is a raft.StreamLayer that writes the preamble on every
// connection it dials and checks it on every connection it accepts.
type idStream struct {
	raft.StreamLayer
	self    string        // this server's ID
	cluster func() string // this server's cluster ID, "" before it applied one
	log     *slog.Logger

	mu     sync.Mutex
	warned map[string]time.Time // what was refused, when it was last logged
}

func newIDStream(inner raft.StreamLayer, self string, cluster func() string, log *slog.Logger) *idStream {
	return &idStream{StreamLayer: inner, self: self, cluster: cluster, log: log, warned: map[string]time.Time{}}
}

// Dial connects to the server the tagged address names and writes the
// preamble.
func (s *idStream) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr, id := untag(a)
	if id == "" {
		return nil, fmt.Errorf("server: raft dial to %s without the ID of the server meant", addr)
	}
	c, err := s.StreamLayer.Dial(raft.ServerAddress(addr), timeout)
	if err != nil {
		return nil, err
	}
	buf := append([]byte(nil), preambleMagic[:]...)
	buf = appendField(buf, id)
	buf = appendField(buf, s.cluster())
	if timeout > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(timeout))
	}
	if _, err := c.Write(buf); err != nil {
		c.Close()
		return nil, fmt.Errorf("server: raft dial to %s: %w", addr, err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}

// Accept returns the next connection, which checks its preamble before
// the first RPC is read from it.
func (s *idStream) Accept() (net.Conn, error) {
	c, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return &idConn{Conn: c, s: s}, nil
}

// appendField appends a length-prefixed string.
func appendField(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// check reads and judges the preamble of an accepted connection.
func (s *idStream) check(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(preambleTimeout))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var magic [4]byte
	if _, err := io.ReadFull(c, magic[:]); err != nil {
		return fmt.Errorf("%w: reading its preamble: %v", errPeerIdentity, err)
	}
	if magic != preambleMagic {
		return s.refuse(c, "it sent no identity preamble (a fencer from before this check, or not fencer)")
	}
	meant, err := readField(c)
	if err != nil {
		return s.unreadable(c, err)
	}
	theirs, err := readField(c)
	if err != nil {
		return s.unreadable(c, err)
	}
	if meant != s.self {
		return s.refuse(c, fmt.Sprintf("it is meant for server %q, and this is %q: the dialer's configuration names this address for another server (a name or IP that now reaches this one)", meant, s.self))
	}
	if ours := s.cluster(); theirs != "" && ours != "" && theirs != ours {
		return s.refuse(c, fmt.Sprintf("it comes from cluster %s, and this server belongs to cluster %s", theirs, ours))
	}
	return nil
}

// refuse logs why a connection is refused (once a minute for the same
// reason) and returns the error that ends it.
func (s *idStream) refuse(c net.Conn, why string) error {
	s.mu.Lock()
	now := time.Now()
	if now.Sub(s.warned[why]) > time.Minute {
		s.warned[why] = now
		s.mu.Unlock()
		s.log.Warn("raft connection refused", "from", c.RemoteAddr().String(), "why", why)
	} else {
		s.mu.Unlock()
	}
	return fmt.Errorf("%w: %s", errPeerIdentity, why)
}

// errLongField is a preamble field over maxPreambleField.
var errLongField = errors.New("a preamble field is too long")

// unreadable ends a connection whose preamble could not be read: a field
// too long is logged (a dialer that names a server or cluster no fencer
// accepts), a connection that closed or stalled is not.
func (s *idStream) unreadable(c net.Conn, err error) error {
	if errors.Is(err, errLongField) {
		return s.refuse(c, err.Error())
	}
	return fmt.Errorf("%w: reading its preamble: %v", errPeerIdentity, err)
}

// readField reads a length-prefixed string.
func readField(r io.Reader) (string, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	l := binary.BigEndian.Uint16(n[:])
	if l > maxPreambleField {
		return "", fmt.Errorf("%w: %d bytes, at most %d", errLongField, l, maxPreambleField)
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// idConn is an accepted connection whose first Read checks the preamble;
// one that fails it is closed and reads nothing.
type idConn struct {
	net.Conn
	s       *idStream
	once    sync.Once
	checked error
}

func (c *idConn) Read(p []byte) (int, error) {
	c.once.Do(func() {
		if c.checked = c.s.check(c.Conn); c.checked != nil {
			c.Conn.Close()
		}
	})
	if c.checked != nil {
		return 0, c.checked
	}
	return c.Conn.Read(p)
}
