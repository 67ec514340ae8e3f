package bench

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fencerlock/fencer/internal/resp"
)

// NullServer answers FENCE.ACQUIRE with a grant (a new token from one
// counter) and FENCE.RELEASE with 1 at once, doing nothing else: the
// harness run against it shows what the load generator itself can do on
// this machine (target "null"), so that a fencer figure near it would
// mean the client, not the server, is the limit. It keeps no lock table
// and never queues.
type NullServer struct {
	ln    net.Listener
	token atomic.Uint64
	// frozen (tests) makes every grant repeat the current token, as a
	// broken server would.
	frozen bool
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// StartNullServer listens on a free loopback port.
func StartNullServer() (*NullServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &NullServer{ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the server's address.
func (s *NullServer) Addr() string { return s.ln.Addr().String() }

// Close stops the server and closes its connections.
func (s *NullServer) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *NullServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// serve reads RESP arrays of bulk strings and answers each; replies to a
// pipelined batch go out in one write.
func (s *NullServer) serve(c net.Conn) {
	r := bufio.NewReader(c)
	rd := resp.NewReader(r)
	w := bufio.NewWriter(c)
	var args []string
	for {
		cmd, err := rd.ReadValue()
		if err != nil || cmd.Kind != resp.Array || len(cmd.Elems) < 1 || len(cmd.Elems) > 64 {
			return
		}
		args = args[:0]
		for _, a := range cmd.Elems {
			if a.Kind != resp.BulkString || a.IsNull || len(a.Str) > 1<<16 {
				return
			}
			args = append(args, a.Str)
		}
		switch strings.ToUpper(args[0]) {
		case "FENCE.ACQUIRE":
			if len(args) < 4 {
				w.WriteString("-ERR wrong number of arguments for 'fence.acquire' command\r\n")
				break
			}
			w.WriteString("*2\r\n:")
			tok := s.token.Load()
			if !s.frozen {
				tok = s.token.Add(1)
			}
			w.WriteString(strconv.FormatUint(tok, 10))
			w.WriteString("\r\n:")
			w.WriteString(args[3])
			w.WriteString("\r\n")
		case "FENCE.RELEASE":
			w.WriteString(":1\r\n")
		case "PING":
			w.WriteString("+PONG\r\n")
		default:
			w.WriteString("-ERR unknown command\r\n")
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}
