package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/fencerlock/fencer/console"
	"github.com/fencerlock/fencer/redisbridge"
	"github.com/fencerlock/fencer/server"
)

// The web console (--ui, package console) is off unless given an address.
// It is served over TLS with the node's certificates when fencerd has
// them (no client certificate asked: users log in), and without them only
// on a loopback address unless --protected-mode=false; either way only
// with users to log in (--users or --requirepass).

// checkUI refuses a --ui that could not be served safely.
func checkUI(addr string, protected bool, bcfg redisbridge.Config, certs *certStore) error {
	if addr == "" {
		return nil
	}
	if bcfg.RequirePass == "" && len(bcfg.Users) == 0 {
		return errors.New("--ui needs --users or --requirepass: the console's users log in as the node's users")
	}
	if certs != nil || !protected {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--ui %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--ui %s is not a loopback address and fencerd has no TLS certificate: refusing to serve the console's passwords and cookies in plain HTTP to other hosts (protected mode); set --tls-cert-file and --tls-key-file, or --protected-mode=false", addr)
}

// uiTLSConfig is the console's TLS config: the node's certificate, read
// on every handshake (a reload reaches it), and no client certificate.
func uiTLSConfig(certs *certStore) *tls.Config {
	if certs == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return certs.cur.Load().cert, nil
	}}
}

// serveUI serves the console on ln (nil: none) until cl runs.
func serveUI(ln net.Listener, c *config, certs *certStore, node *server.Node, logger *slog.Logger, cl *cleanup) error {
	if ln == nil {
		return nil
	}
	creds, err := c.bridge.Credentials()
	if err != nil {
		return fmt.Errorf("--ui: %w", err)
	}
	con, err := console.New(console.Config{
		Check: func(name, password string) (string, bool) {
			u, ok := creds.Check(name, password)
			return u.Pattern, ok
		},
		NodeAddr: c.node.ClientAddr, DialTLS: certs.dialConfig(), Secure: certs != nil,
		Watches: node, Logger: logger,
	})
	if err != nil {
		return err
	}
	cl.push(con.Close)
	srv := &http.Server{Handler: con.Handler(), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 16 << 10, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	ln = &limitedListener{Listener: ln, slots: make(chan struct{}, maxUIConns)}
	scheme := "http"
	if tc := uiTLSConfig(certs); tc != nil {
		ln, scheme = tls.NewListener(ln, tc), "https"
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("console stopped", "err", err)
		}
	}()
	cl.push(func() { _ = srv.Close() })
	logger.Info("serving the web console", "url", scheme+"://"+ln.Addr().String()+"/")
	return nil
}

// listenUI opens the --ui listener, or returns nil without --ui.
func listenUI(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--ui: %w", err)
	}
	return ln, nil
}

// maxUIConns bounds the console's open connections: its sessions' feeds
// (64 sessions, 4 feeds each) and room for the page's other requests and
// for logins.
const maxUIConns = 512

// limitedListener closes a connection accepted beyond its slots at once,
// so that connections held open by a client that never logs in cannot
// exhaust the node's descriptors.
type limitedListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
		default:
			_ = c.Close()
		}
	}
}

// slotConn gives its slot back once, when closed.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
