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
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// PostgreSQL for the tests: initdb runs once (it takes seconds), into a
// template directory that TestMain removes; each test then copies the
// template, starts its own server on a free loopback port (a fraction of a
// second), and stops it when it ends.
var pgTemplate struct {
	once sync.Once
	dir  string // holds data/, an initialised cluster
	bin  string
	err  error
}

// missingPostgres is the advice given when PostgreSQL cannot be started.
const missingPostgres = "these tests need a real PostgreSQL server (initdb, pg_ctl and postgres);" +
	" on Debian or Ubuntu install it with: apt-get install postgresql"

// pgServer is a running PostgreSQL cluster of one test.
type pgServer struct {
	bin     string // directory holding initdb, pg_ctl, postgres
	dir     string // owned by the server's user: data, socket, log
	port    string
	asUser  []string // command prefix that runs as the postgres user, if root
	logPath string
}

// openPostgres starts a PostgreSQL server of the test's own and returns a
// connection pool to it; both are closed when the test ends. It fails the
// test (never skips it) if PostgreSQL cannot be started.
func openPostgres(t *testing.T) *sql.DB {
	t.Helper()
	pgTemplate.once.Do(func() { pgTemplate.bin, pgTemplate.dir, pgTemplate.err = initPostgres() })
	if pgTemplate.err != nil {
		t.Fatalf("preparing PostgreSQL: %v\n%s", pgTemplate.err, missingPostgres)
	}
	s, err := startPostgres(pgTemplate.bin, pgTemplate.dir)
	if err != nil {
		t.Fatalf("starting PostgreSQL: %v\n%s", err, missingPostgres)
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	})
	db, err := sql.Open("pgx", s.dsn("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // runs before the stop above
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		log, _ := os.ReadFile(s.logPath)
		t.Fatalf("connecting to PostgreSQL at 127.0.0.1:%s: %v\nserver log:\n%s", s.port, err, log)
	}
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

// asPostgres returns the command prefix that runs a server binary as the
// postgres user when this process is root (initdb refuses to run as root;
// Debian's package creates that user), and chowns dir to that user.
func asPostgres(dir string) ([]string, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and there is no postgres user to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		return nil, fmt.Errorf("running as root and runuser (util-linux) is not on PATH: %w", err)
	}
	return []string{runuser, "-u", "postgres", "--"}, nil
}

// initPostgres creates the template cluster in a new temporary directory
// and returns the binaries' directory and the template's.
func initPostgres() (bin, dir string, err error) {
	if bin, err = postgresBin(); err != nil {
		return "", "", err
	}
	if dir, err = os.MkdirTemp("", "fencesql-pg-template-"); err != nil {
		return "", "", err
	}
	s := &pgServer{bin: bin, dir: dir}
	if s.asUser, err = asPostgres(dir); err != nil {
		os.RemoveAll(dir)
		return "", "", err
	}
	if out, err := s.run("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return bin, dir, nil
}

// startPostgres copies the template cluster into a new temporary directory
// and starts a server on it, on a free loopback port.
func startPostgres(bin, template string) (*pgServer, error) {
	dir, err := os.MkdirTemp("", "fencesql-pg-")
	if err != nil {
		return nil, err
	}
	s := &pgServer{bin: bin, dir: dir, logPath: filepath.Join(dir, "postgres.log")}
	if s.asUser, err = asPostgres(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// cp -a keeps the owner (when root) and the data directory's 0700.
	if out, err := exec.Command("cp", "-a", filepath.Join(template, "data"), filepath.Join(dir, "data")).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("copying the template cluster: %v\n%s", err, out)
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
	}, " ")
	if out, err := s.run("pg_ctl", "-D", filepath.Join(dir, "data"), "-l", s.logPath, "-o", opts, "-w", "-t", "60", "start"); err != nil {
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

// removePostgresTemplate removes the template cluster, if a test made one.
func removePostgresTemplate() error {
	if pgTemplate.dir == "" {
		return nil
	}
	return os.RemoveAll(pgTemplate.dir)
}
