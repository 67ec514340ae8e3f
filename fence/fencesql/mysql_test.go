package fencesql_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" database/sql driver
)

// MariaDB for the tests: one server per test binary, started by the first
// test that needs it (mariadb-install-db and the start take a few seconds
// together) and stopped by TestMain; each test gets a database of its own.
var mysqlShared struct {
	once sync.Once
	s    *mysqlServer
	err  error
	n    atomic.Int64 // numbers the tests' databases
}

// missingMySQL is the advice given when MariaDB cannot be started.
const missingMySQL = "these tests need a real MariaDB server (mariadb-install-db and mariadbd);" +
	" on Debian or Ubuntu install it with: apt-get install mariadb-server"

// mysqlServer is the running MariaDB server of the tests.
type mysqlServer struct {
	dir     string // data, socket, log; removed by stop
	port    string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	logPath string
	admin   *sql.DB
}

// openMySQL returns a connection pool to a new database of the test's own
// on the shared MariaDB server, with the DSN parameters params (such as
// "clientFoundRows=true"); the database is dropped when the test ends. It
// fails the test (never skips it) if MariaDB cannot be started.
func openMySQL(t *testing.T, params string) *sql.DB {
	t.Helper()
	name := newMySQLDatabase(t)
	return openMySQLDatabase(t, name, params)
}

// newMySQLDatabase creates a database for the test, dropped when it ends,
// and returns its name.
func newMySQLDatabase(t *testing.T) string {
	t.Helper()
	mysqlShared.once.Do(func() { mysqlShared.s, mysqlShared.err = startMySQL() })
	if mysqlShared.err != nil {
		t.Fatalf("starting MariaDB: %v\n%s", mysqlShared.err, missingMySQL)
	}
	s := mysqlShared.s
	name := fmt.Sprintf("fencesql_%d", mysqlShared.n.Add(1))
	if _, err := s.admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("CREATE DATABASE %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := s.admin.Exec("DROP DATABASE " + name); err != nil {
			t.Errorf("DROP DATABASE %s: %v", name, err)
		}
	})
	return name
}

// openMySQLDatabase opens a connection pool to the database name, closed
// when the test ends.
func openMySQLDatabase(t *testing.T, name, params string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", mysqlShared.s.dsn(name, params))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // runs before the DROP DATABASE above
	if err := db.Ping(); err != nil {
		t.Fatalf("connecting to MariaDB database %s: %v", name, err)
	}
	return db
}

func (s *mysqlServer) dsn(db, params string) string {
	dsn := fmt.Sprintf("root@tcp(127.0.0.1:%s)/%s?timeout=10s", s.port, db)
	if params != "" {
		dsn += "&" + params
	}
	return dsn
}

// mysqlTool finds the first of names on PATH or in /usr/sbin (where Debian
// puts mariadbd, off a normal user's PATH).
func mysqlTool(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
		if p := filepath.Join("/usr/sbin", n); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %v on PATH or in /usr/sbin", names)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// startMySQL creates a data directory in a new temporary directory and
// starts MariaDB on it, on a free loopback port, without grant tables (any
// user name connects, as a superuser: it listens on 127.0.0.1 only and
// lives as long as the tests).
func startMySQL() (*mysqlServer, error) {
	installDB, err := mysqlTool("mariadb-install-db", "mysql_install_db")
	if err != nil {
		return nil, err
	}
	mysqld, err := mysqlTool("mariadbd", "mysqld")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fencesql-mysql-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	// The server refuses to run as root unless told to; the files are then
	// root's, like the temporary directory.
	var asUser []string
	if os.Geteuid() == 0 {
		asUser = []string{"--user=root"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, installDB, append([]string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db"}, asUser...)...)
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %v\n%s", installDB, err, out)
	}
	// The free port is found by listening on port 0 and closing: another
	// process may take it before the server binds it, which the server
	// reports in its log as it exits; then try another.
	for attempt := 1; ; attempt++ {
		s, err := launchMySQL(mysqld, dir, append([]string{"--datadir=" + data}, asUser...))
		if err == nil || attempt == 3 || !errors.Is(err, errPortTaken) {
			if err != nil {
				os.RemoveAll(dir)
			}
			return s, err
		}
	}
}

// errPortTaken means the server could not bind its port.
var errPortTaken = errors.New("port taken")

// launchMySQL starts the server on the initialised data directory in dir,
// with extra arguments args, and waits until it answers.
func launchMySQL(mysqld, dir string, args []string) (*mysqlServer, error) {
	s := &mysqlServer{dir: dir, logPath: filepath.Join(dir, "error.log"), exited: make(chan struct{})}
	os.Remove(s.logPath) // a failed attempt's
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	ln.Close()
	args = append([]string{"--no-defaults", // no /etc/mysql: its socket, port and log
		"--socket=" + filepath.Join(dir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(dir, "mysqld.pid"),
		"--log-error=" + s.logPath,
		"--port=" + s.port,
		"--bind-address=127.0.0.1",
		"--skip-grant-tables",
		"--skip-name-resolve",
		"--innodb-flush-log-at-trx-commit=0", // a throwaway server: speed over durability
		"--innodb-buffer-pool-size=64M",
		// A test that fails holding a transaction open must not leave
		// its DROP DATABASE waiting for the table locks for a year.
		"--lock-wait-timeout=30",
	}, args...)
	s.cmd = exec.Command(mysqld, args...)
	s.cmd.Dir = dir
	dieWithParent(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	if s.admin, err = sql.Open("mysql", s.dsn("", "")); err != nil {
		s.kill()
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		pingCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = s.admin.PingContext(pingCtx)
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			err = fmt.Errorf("mariadbd exited: %v", s.cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			err = fmt.Errorf("mariadbd not answering on 127.0.0.1:%s after a minute: %w", s.port, err)
		}
		s.kill()
		log, _ := os.ReadFile(s.logPath)
		if bytes.Contains(log, []byte("Address already in use")) {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return nil, fmt.Errorf("%w\nserver log:\n%s", err, log)
	}
}

// kill stops a server that failed to start, leaving its directory.
func (s *mysqlServer) kill() {
	if s.admin != nil {
		s.admin.Close()
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// stop shuts the server down (SIGTERM, a clean shutdown; SIGKILL if it
// takes over a minute) and removes its directory.
func (s *mysqlServer) stop() error {
	var err error
	if s.admin != nil {
		s.admin.Close()
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(time.Minute):
			_ = s.cmd.Process.Kill()
			<-s.exited
			err = errors.New("mariadbd did not stop within a minute of SIGTERM; killed it")
		}
	}
	if rmErr := os.RemoveAll(s.dir); err == nil {
		err = rmErr
	}
	return err
}

// stopMySQL stops the shared server, if a test started it.
func stopMySQL() error {
	if mysqlShared.s == nil {
		return nil
	}
	return mysqlShared.s.stop()
}
