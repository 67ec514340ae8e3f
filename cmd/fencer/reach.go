package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"
)

// reachWait bounds finding out that no address answers: a person should
// hear it at once, not after --timeout of retries.
const reachWait = 2 * time.Second

// reachable returns nil as soon as one of the addresses answers as a fencer
// node; if none does within reachWait, an error that says what each
// address did and where the addresses came from.
func (a *app) reachable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, reachWait)
	defer cancel()
	type result struct {
		addr string
		err  error
	}
	ch := make(chan result, len(a.addrs))
	for _, addr := range a.addrs {
		go func() { ch <- result{addr, a.probe(ctx, addr)} }()
	}
	var problems []string
	for range a.addrs {
		r := <-ch
		if r.err == nil {
			return nil
		}
		problems = append(problems, fmt.Sprintf("  %s: %v", r.addr, r.err))
	}
	slices.Sort(problems)
	return fmt.Errorf("no fencer node answers at %s (%s):\n%s", strings.Join(a.addrs, ","), a.addrSource, strings.Join(problems, "\n"))
}

// probe asks addr for the leader, as a fencer node answers, and says what
// is wrong if it does not.
func (a *app) probe(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("no answer to connecting within %v", reachWait)
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			return fmt.Errorf("cannot connect: %v", op.Err)
		}
		return fmt.Errorf("cannot connect: %v", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if cfg := a.sec.tlsConfig; cfg != nil {
		cfg = cfg.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS handshake failed (is it a TLS port? --tls is on): %v", err)
		}
		conn = tc
	}
	if _, err := conn.Write([]byte("*1\r\n$12\r\nFENCE.LEADER\r\n")); err != nil {
		return fmt.Errorf("connected, then: %v", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	switch {
	case err != nil && line == "":
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("connected, but no answer within %v: not a fencer node (or a TLS port without --tls)?", reachWait)
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("connected, but the connection closed without an answer: not a fencer node (or a TLS port without --tls)?")
		}
		return fmt.Errorf("connected, then: %v", err)
	case strings.HasPrefix(line, "HTTP/"):
		return fmt.Errorf("answers HTTP, not the Redis protocol: is it fencerd's --http-listen port? Clients use its --listen port (7379 by default)")
	case strings.HasPrefix(line, "-ERR unknown command"):
		return fmt.Errorf("a Redis server, not a fencer node (it does not know FENCE.LEADER)")
	case line != "" && strings.ContainsRune("*$_-%", rune(line[0])):
		return nil // a fencer node: the leader, none, or NOAUTH
	}
	return fmt.Errorf("does not speak the Redis protocol (it answered %q)", strings.TrimSpace(truncateText(line, 40)))
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// lockFailure gives err, which kept fencer lock or elect from taking its
// lock, their status for that (a bad command line keeps its own).
func lockFailure(err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitLockFail, err: err}
}
