package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// The PostgreSQL server the tests share: started by the first test that
// needs it, in a temporary directory, on a free loopback port, and stopped
// by TestMain.
var pg struct {
	once sync.Once
	srv  *pgServer
	err  error
	dbs  atomic.Int64 // databases created, for unique names
}

// missingPostgres is the advice given when PostgreSQL cannot be started.
const missingPostgres = "these tests need a real PostgreSQL server (initdb, pg_ctl and postgres);" +
	" on Debian or Ubuntu install it with: apt-get install postgresql"

// pgServer is a running PostgreSQL cluster of the tests' own.
type pgServer struct {
	bin     string // directory holding initdb, pg_ctl, postgres
	dir     string // owned by the server's user: data, socket, log
	port    string
	asUser  []string // command prefix that runs as the postgres user, if root
	logPath string
}

// openPostgres returns a connection pool to a fresh database on the shared
// server, dropped when the test ends. It fails the test (never skips it) if
// PostgreSQL cannot be started.
func openPostgres(t *testing.T) *sql.DB {
	t.Helper()
	pg.once.Do(func() { pg.srv, pg.err = startPostgres() })
	if pg.err != nil {
		t.Fatalf("starting PostgreSQL: %v\n%s", pg.err, missingPostgres)
	}
	admin, err := sql.Open("pgx", pg.srv.dsn("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := fmt.Sprintf("fencesql_%d", pg.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	db, err := sql.Open("pgx", pg.srv.dsn(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		admin, err := sql.Open("pgx", pg.srv.dsn("postgres"))
		if err != nil {
			t.Error(err)
			return
		}
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("dropping database %s: %v", name, err)
		}
	})
	return db
}

func (s *pgServer) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s?sslmode=disable", s.port, db)
}

// postgresBin returns the directory of the newest PostgreSQL server
// binaries: Debian keeps them in /usr/lib/postgresql/VERSION/bin, off PATH;
// elsewhere they are on PATH.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) > 0 {
		version := func(d string) int {
			v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			return v
		}
		sort.Slice(found, func(i, j int) bool { return version(found[i]) < version(found[j]) })
		return found[len(found)-1], nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no initdb under /usr/lib/postgresql/*/bin or on PATH")
}

// startPostgres creates a cluster in a new temporary directory and starts
// it on a free loopback port. initdb refuses to run as root, so a root
// process runs the server as the postgres user (which Debian's package
// creates), with runuser, in a directory that user owns.
func startPostgres() (*pgServer, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fencesql-pg-")
	if err != nil {
		return nil, err
	}
	s := &pgServer{bin: bin, dir: dir, logPath: filepath.Join(dir, "postgres.log")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, and there is no postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and runuser (util-linux) is not on PATH: %w", err)
		}
		s.asUser = []string{runuser, "-u", "postgres", "--"}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	ln.Close()
	opts := strings.Join([]string{
		"-c listen_addresses=127.0.0.1",
		"-c port=" + s.port,
		"-c unix_socket_directories=" + dir,
		"-c fsync=off", // a throwaway cluster: speed over durability
		"-c max_connections=200",
	}, " ")
	if out, err := s.run("pg_ctl", "-D", data, "-l", s.logPath, "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(s.logPath)
		s.stop()
		return nil, fmt.Errorf("pg_ctl start: %v\n%s\nserver log:\n%s", err, out, log)
	}
	return s, nil
}

// run runs one of the server binaries, as the postgres user if needed.
func (s *pgServer) run(name string, args ...string) ([]byte, error) {
	argv := append(append(append([]string{}, s.asUser...), filepath.Join(s.bin, name)), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

// stop stops the server (fast shutdown) and removes its directory.
func (s *pgServer) stop() error {
	var err error
	data := filepath.Join(s.dir, "data")
	if _, statErr := os.Stat(filepath.Join(data, "postmaster.pid")); statErr == nil {
		if out, runErr := s.run("pg_ctl", "-D", data, "-m", "fast", "-w", "-t", "60", "stop"); runErr != nil {
			err = fmt.Errorf("pg_ctl stop: %v\n%s", runErr, out)
			_, _ = s.run("pg_ctl", "-D", data, "-m", "immediate", "-w", "-t", "60", "stop")
		}
	}
	if rmErr := os.RemoveAll(s.dir); err == nil {
		err = rmErr
	}
	return err
}

// stopPostgres stops the shared server if a test started it.
func stopPostgres() error {
	if pg.srv == nil {
		return nil
	}
	return pg.srv.stop()
}
