package fencesql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/fence/fencesql"
	"github.com/fencerlock/fencer/internal/fencetest"
)

// backend is one real database the tests run against.
type backend struct {
	dialect fencesql.Dialect
	db      *sql.DB
}

// eachBackend runs f against a fresh PostgreSQL database, a fresh SQLite
// database and two fresh MariaDB databases, as subtests. The second MariaDB
// connection pool reports rows found rather than rows changed
// (clientFoundRows=true), which fencesql must not depend on.
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("postgres", func(t *testing.T) { f(t, backend{fencesql.Postgres, openPostgres(t)}) })
	t.Run("sqlite", func(t *testing.T) { f(t, backend{fencesql.SQLite, openSQLite(t)}) })
	t.Run("mysql", func(t *testing.T) { f(t, backend{fencesql.MySQL, openMySQL(t, "")}) })
	t.Run("mysql-foundrows", func(t *testing.T) {
		f(t, backend{fencesql.MySQL, openMySQL(t, "clientFoundRows=true")})
	})
}

// exec runs the statements. For MySQL, which cannot index a TEXT column
// whole, a TEXT PRIMARY KEY is made a VARCHAR(100) one.
func (b backend) exec(t *testing.T, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if b.dialect == fencesql.MySQL {
			s = strings.ReplaceAll(s, "TEXT PRIMARY KEY", "VARCHAR(100) PRIMARY KEY")
		}
		if _, err := b.db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// landingLog creates a table "landed" that a trigger fills with the token of
// every row of table that is inserted or updated, in the order the writes
// land (seq): the database's own record of what got through.
func (b backend) landingLog(t *testing.T, table string) {
	t.Helper()
	if b.dialect == fencesql.Postgres {
		b.exec(t,
			`CREATE TABLE landed (seq BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL)`,
			`CREATE FUNCTION log_landing() RETURNS trigger LANGUAGE plpgsql AS $$
			 BEGIN INSERT INTO landed (token) VALUES (NEW.token); RETURN NEW; END $$`,
			`CREATE TRIGGER `+table+`_landed AFTER INSERT OR UPDATE ON `+table+` FOR EACH ROW EXECUTE FUNCTION log_landing()`)
		return
	}
	if b.dialect == fencesql.MySQL {
		// MySQL runs the update trigger for every row an ON DUPLICATE KEY
		// UPDATE finds, changed or not; only a changed row has landed (the
		// tests that use the log write a new body each time).
		b.exec(t,
			`CREATE TABLE landed (seq BIGINT AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL)`,
			`CREATE TRIGGER `+table+`_inserted AFTER INSERT ON `+table+` FOR EACH ROW INSERT INTO landed (token) VALUES (NEW.token)`,
			`CREATE TRIGGER `+table+`_updated AFTER UPDATE ON `+table+` FOR EACH ROW
			 IF NOT (NEW.token <=> OLD.token AND NEW.body <=> OLD.body) THEN INSERT INTO landed (token) VALUES (NEW.token); END IF`)
		return
	}
	b.exec(t,
		`CREATE TABLE landed (seq INTEGER PRIMARY KEY AUTOINCREMENT, token INTEGER NOT NULL)`,
		`CREATE TRIGGER `+table+`_inserted AFTER INSERT ON `+table+` BEGIN INSERT INTO landed (token) VALUES (NEW.token); END`,
		`CREATE TRIGGER `+table+`_updated AFTER UPDATE ON `+table+` BEGIN INSERT INTO landed (token) VALUES (NEW.token); END`)
}

// landed returns the tokens in the landing log, in landing order.
func (b backend) landed(t *testing.T) []uint64 {
	t.Helper()
	rows, err := b.db.Query(`SELECT token FROM landed ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		out = append(out, uint64(tok))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTableWrite(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		b.exec(t, `CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT, author TEXT)`)
		docs, err := fencesql.NewTable(b.dialect, "docs", "id", "token", "body", "author")
		if err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			key       string
			token     uint64
			body      string
			staleOver uint64 // the highest that refuses it, 0 if admitted
		}{
			{"a", 5, "first", 0},
			{"a", 5, "first, edited", 0},
			{"a", 4, "late", 5},
			{"b", 1, "other row", 0},
			{"a", 9, "newer holder", 0},
			{"a", 5, "old holder again", 9},
		}
		for _, st := range steps {
			err := docs.Write(ctx, b.db, st.key, st.token, st.body, "w"+fmt.Sprint(st.token))
			if st.staleOver == 0 {
				if err != nil {
					t.Fatalf("write %q with token %d: %v", st.body, st.token, err)
				}
				continue
			}
			fencetest.WantStale(t, err, st.key, st.token, st.staleOver)
		}
		got := map[string]string{}
		rows, err := b.db.Query(`SELECT id, token, body, author FROM docs`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, body, author string
			var tok int64
			if err := rows.Scan(&id, &tok, &body, &author); err != nil {
				t.Fatal(err)
			}
			got[id] = fmt.Sprintf("%d %s %s", tok, body, author)
		}
		want := map[string]string{"a": "9 newer holder w9", "b": "1 other row w1"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("table holds %v, want %v", got, want)
		}
		if err := docs.Write(ctx, b.db, "a", 1<<63, "x", "y"); !errors.Is(err, fencesql.ErrTokenRange) {
			t.Errorf("token 1<<63: %v, want ErrTokenRange", err)
		}
		if err := docs.Write(ctx, b.db, "a", 10, "too few values"); !errors.Is(err, fencesql.ErrDefinition) {
			t.Errorf("one value for two columns: %v, want ErrDefinition", err)
		}
	})
}

// TestTableWriteInTransaction: a refused write inside a transaction leaves
// the transaction usable, and its other writes commit.
func TestTableWriteInTransaction(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		b.exec(t, `CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)`,
			`CREATE TABLE notes (note TEXT)`)
		docs, _ := fencesql.NewTable(b.dialect, "docs", "id", "token", "body")
		if err := docs.Write(ctx, b.db, "a", 7, "seven"); err != nil {
			t.Fatal(err)
		}
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() // after Commit, a no-op; after a failure, frees the locks
		fencetest.WantStale(t, docs.Write(ctx, tx, "a", 6, "six"), "a", 6, 7)
		if _, err := tx.Exec(`INSERT INTO notes (note) VALUES ('refused 6')`); err != nil {
			t.Fatalf("transaction unusable after a refused write: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var body, note string
		if err := b.db.QueryRow(`SELECT body FROM docs WHERE id = 'a'`).Scan(&body); err != nil || body != "seven" {
			t.Errorf("docs[a] = %q, %v; want seven", body, err)
		}
		if err := b.db.QueryRow(`SELECT note FROM notes`).Scan(&note); err != nil || note != "refused 6" {
			t.Errorf("note = %q, %v", note, err)
		}
	})
}

func TestTokensDo(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		tokens, err := fencesql.NewTokens(b.dialect, "fence_tokens")
		if err != nil {
			t.Fatal(err)
		}
		if err := tokens.CreateTable(ctx, b.db); err != nil {
			t.Fatal(err)
		}
		if err := tokens.CreateTable(ctx, b.db); err != nil {
			t.Fatalf("CreateTable again: %v", err)
		}
		b.exec(t, `CREATE TABLE ledger (account TEXT, amount BIGINT, token BIGINT)`,
			`CREATE TABLE balances (account TEXT PRIMARY KEY, balance BIGINT)`,
			`INSERT INTO balances VALUES ('acct', 0)`)
		deposit := func(token uint64, amount int64, fail error) error {
			return tokens.Do(ctx, b.db, "account/acct", token, func(tx *sql.Tx) error {
				if _, err := tx.Exec(`INSERT INTO ledger VALUES ('acct', ` + fmt.Sprint(amount) + `, ` + fmt.Sprint(token) + `)`); err != nil {
					return err
				}
				if _, err := tx.Exec(`UPDATE balances SET balance = balance + ` + fmt.Sprint(amount)); err != nil {
					return err
				}
				return fail
			})
		}
		if _, ok, err := tokens.Highest(ctx, b.db, "account/acct"); ok || err != nil {
			t.Fatalf("Highest before any write: %v, %v", ok, err)
		}
		if err := deposit(10, 100, nil); err != nil {
			t.Fatal(err)
		}
		if err := deposit(12, 5, nil); err != nil {
			t.Fatal(err)
		}
		fencetest.WantStale(t, deposit(11, 1000, nil), "account/acct", 11, 12)
		boom := errors.New("payment service down")
		if err := deposit(13, 7, boom); !errors.Is(err, boom) {
			t.Fatalf("failing write: %v", err)
		}
		// The failed write with 13 was rolled back with its admission, so 12
		// is still the highest and its holder may go on.
		if h, ok, err := tokens.Highest(ctx, b.db, "account/acct"); h != 12 || !ok || err != nil {
			t.Fatalf("Highest = %d, %v, %v; want 12", h, ok, err)
		}
		if err := deposit(12, 1, nil); err != nil {
			t.Fatal(err)
		}
		var balance, entries int64
		if err := b.db.QueryRow(`SELECT balance FROM balances`).Scan(&balance); err != nil {
			t.Fatal(err)
		}
		if err := b.db.QueryRow(`SELECT count(*) FROM ledger`).Scan(&entries); err != nil {
			t.Fatal(err)
		}
		if balance != 106 || entries != 3 {
			t.Errorf("balance %d over %d ledger entries, want 106 over 3 (tokens 10, 12, 12)", balance, entries)
		}
	})
}

// TestPostgresQualifiedName: a schema-qualified table name is quoted part
// by part.
func TestPostgresQualifiedName(t *testing.T) {
	b := backend{fencesql.Postgres, openPostgres(t)}
	b.exec(t, `CREATE SCHEMA app`, `CREATE TABLE app."Docs" (id INT PRIMARY KEY, tok BIGINT NOT NULL, body TEXT)`)
	docs, _ := fencesql.NewTable(fencesql.Postgres, `app.Docs`, "id", "tok", "body")
	ctx := context.Background()
	if err := docs.Write(ctx, b.db, 1, 3, "x"); err != nil {
		t.Fatal(err)
	}
	fencetest.WantStale(t, docs.Write(ctx, b.db, 1, 2, "y"), "1", 2, 3)
}

func TestTableConcurrentInterleavedTokens(t *testing.T) {
	const holders, writes = 8, 25
	eachBackend(t, func(t *testing.T, b backend) {
		b.exec(t, `CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)`)
		b.landingLog(t, "docs")
		docs, _ := fencesql.NewTable(b.dialect, "docs", "id", "token", "body")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		refused := fencetest.Writers(t, holders, writes, func(token uint64, i int) (bool, error) {
			return fencetest.Refusal(token, docs.Write(ctx, b.db, "doc", token, fmt.Sprintf("holder %d write %d", token, i)))
		})
		fencetest.CheckHistory(t, refused, holders, writes, b.landed(t))
		var tok int64
		var body string
		if err := b.db.QueryRow(`SELECT token, body FROM docs WHERE id = 'doc'`).Scan(&tok, &body); err != nil {
			t.Fatal(err)
		}
		if tok != holders || !strings.HasPrefix(body, fmt.Sprintf("holder %d ", holders)) {
			t.Errorf("row holds token %d, %q; want the newest holder's", tok, body)
		}
	})
}

func TestTokensConcurrentInterleavedTokens(t *testing.T) {
	const holders, writes = 8, 25
	eachBackend(t, func(t *testing.T, b backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		tokens, _ := fencesql.NewTokens(b.dialect, "fence_tokens")
		if err := tokens.CreateTable(ctx, b.db); err != nil {
			t.Fatal(err)
		}
		// The guarded write appends to a log, whose sequence the database
		// assigns, and overwrites a summary row: two statements that only
		// the transaction keeps together.
		events := `CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, token BIGINT NOT NULL)`
		switch b.dialect {
		case fencesql.Postgres:
			events = `CREATE TABLE events (seq BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL)`
		case fencesql.MySQL:
			events = `CREATE TABLE events (seq BIGINT AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL)`
		}
		b.exec(t, events, `CREATE TABLE summary (id INT PRIMARY KEY, last_token BIGINT, count BIGINT)`,
			`INSERT INTO summary VALUES (1, 0, 0)`)
		refused := fencetest.Writers(t, holders, writes, func(token uint64, i int) (bool, error) {
			return fencetest.Refusal(token, tokens.Do(ctx, b.db, "stream", token, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO events (token) VALUES (%d)`, token)); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, fmt.Sprintf(`UPDATE summary SET last_token = %d, count = count + 1`, token))
				return err
			}))
		})
		rows, err := b.db.Query(`SELECT token FROM events ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		var landed []uint64
		for rows.Next() {
			var tok int64
			if err := rows.Scan(&tok); err != nil {
				t.Fatal(err)
			}
			landed = append(landed, uint64(tok))
		}
		rows.Close()
		fencetest.CheckHistory(t, refused, holders, writes, landed)
		var last, count int64
		if err := b.db.QueryRow(`SELECT last_token, count FROM summary`).Scan(&last, &count); err != nil {
			t.Fatal(err)
		}
		if last != holders || count != int64(len(landed)) {
			t.Errorf("summary: last token %d, count %d; want %d, %d", last, count, holders, len(landed))
		}
	})
}

// TestEqualTokenIdenticalValues: a holder repeating a write, same token and
// same values, is admitted each time, although the database changes nothing
// (MySQL reports no row affected, or one with clientFoundRows), alone or in
// a transaction; a lower token with those values is refused.
func TestEqualTokenIdenticalValues(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		b.exec(t, `CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)`)
		docs, _ := fencesql.NewTable(b.dialect, "docs", "id", "token", "body")
		for i := range 3 {
			if err := docs.Write(ctx, b.db, "a", 5, "same"); err != nil {
				t.Fatalf("write %d of token 5: %v", i, err)
			}
		}
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() // after Commit, a no-op; after a failure, frees the locks
		if err := docs.Write(ctx, tx, "a", 5, "same"); err != nil {
			t.Fatalf("token 5 again, in a transaction: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		fencetest.WantStale(t, docs.Write(ctx, b.db, "a", 4, "same"), "a", 4, 5)

		tokens, _ := fencesql.NewTokens(b.dialect, "fence_tokens")
		if err := tokens.CreateTable(ctx, b.db); err != nil {
			t.Fatal(err)
		}
		calls := 0
		for i := range 3 {
			err := tokens.Do(ctx, b.db, "r", 5, func(*sql.Tx) error { calls++; return nil })
			if err != nil {
				t.Fatalf("Do %d with token 5: %v", i, err)
			}
		}
		fencetest.WantStale(t, tokens.Do(ctx, b.db, "r", 4, func(*sql.Tx) error { calls++; return nil }), "r", 4, 5)
		if calls != 3 {
			t.Errorf("write ran %d times, want 3 (not for the stale token)", calls)
		}
	})
}

// TestTokensRange: a token above 1<<63-1 is refused before anything runs.
func TestTokensRange(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		tokens, _ := fencesql.NewTokens(b.dialect, "fence_tokens")
		if err := tokens.CreateTable(ctx, b.db); err != nil {
			t.Fatal(err)
		}
		if err := tokens.Do(ctx, b.db, "r", 1<<63-1, func(*sql.Tx) error { return nil }); err != nil {
			t.Fatalf("token 1<<63-1: %v", err)
		}
		called := false
		err := tokens.Do(ctx, b.db, "r", 1<<63, func(*sql.Tx) error { called = true; return nil })
		if !errors.Is(err, fencesql.ErrTokenRange) || called {
			t.Errorf("Do with token 1<<63: %v, write called %v; want ErrTokenRange, not called", err, called)
		}
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := tokens.Admit(ctx, tx, "r", 1<<64-1); !errors.Is(err, fencesql.ErrTokenRange) {
			t.Errorf("Admit with token 1<<64-1: %v, want ErrTokenRange", err)
		}
	})
}

// TestStaleDoRolledBack: the writes of a stale Do never run, and those of
// a stale Admit in the caller's transaction are rolled back with it.
func TestStaleDoRolledBack(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		tokens, _ := fencesql.NewTokens(b.dialect, "fence_tokens")
		if err := tokens.CreateTable(ctx, b.db); err != nil {
			t.Fatal(err)
		}
		b.exec(t, `CREATE TABLE notes (note TEXT)`)
		note := func(tx *sql.Tx, s string) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO notes (note) VALUES ('`+s+`')`)
			return err
		}
		if err := tokens.Do(ctx, b.db, "r", 9, func(tx *sql.Tx) error { return note(tx, "nine") }); err != nil {
			t.Fatal(err)
		}
		fencetest.WantStale(t, tokens.Do(ctx, b.db, "r", 8, func(tx *sql.Tx) error { return note(tx, "eight") }), "r", 8, 9)

		// A caller that writes first and admits last, then rolls back.
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() // after Commit, a no-op; after a failure, frees the locks
		if err := note(tx, "seven"); err != nil {
			t.Fatal(err)
		}
		fencetest.WantStale(t, tokens.Admit(ctx, tx, "r", 7), "r", 7, 9)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		var notes []string
		rows, err := b.db.Query(`SELECT note FROM notes`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			notes = append(notes, n)
		}
		if fmt.Sprint(notes) != "[nine]" {
			t.Errorf("notes %v, want only [nine]", notes)
		}
		if h, ok, err := tokens.Highest(ctx, b.db, "r"); h != 9 || !ok || err != nil {
			t.Errorf("Highest = %d, %v, %v; want 9", h, ok, err)
		}
	})
}

// TestTokensResourcesAreExact: resources are compared byte for byte: case,
// trailing spaces and accents make different resources.
func TestTokensResourcesAreExact(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		tokens, _ := fencesql.NewTokens(b.dialect, "fence_tokens")
		if err := tokens.CreateTable(ctx, b.db); err != nil {
			t.Fatal(err)
		}
		nop := func(*sql.Tx) error { return nil }
		if err := tokens.Do(ctx, b.db, "acct", 9, nop); err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{"ACCT", "acct ", "accť", "acc"} {
			if err := tokens.Do(ctx, b.db, r, 1, nop); err != nil {
				t.Errorf("resource %q, token 1, after acct got 9: %v", r, err)
			}
		}
		fencetest.WantStale(t, tokens.Do(ctx, b.db, "acct", 1, nop), "acct", 1, 9)
	})
}

func TestUnknownDialect(t *testing.T) {
	if _, err := fencesql.NewTable(fencesql.Dialect(42), "docs", "id", "token", "body"); !errors.Is(err, fencesql.ErrDefinition) {
		t.Errorf("NewTable with dialect 42: %v, want ErrDefinition", err)
	}
	if _, err := fencesql.NewTokens(fencesql.Dialect(-1), "fence_tokens"); !errors.Is(err, fencesql.ErrDefinition) {
		t.Errorf("NewTokens with dialect -1: %v, want ErrDefinition", err)
	}
}

// TestMySQLQualifiedName: a database-qualified table name is quoted part by
// part, with backticks, a backtick in a name doubled.
func TestMySQLQualifiedName(t *testing.T) {
	name := newMySQLDatabase(t)
	b := backend{fencesql.MySQL, openMySQLDatabase(t, name, "")}
	b.exec(t, "CREATE TABLE `Do``cs` (id INT PRIMARY KEY, tok BIGINT NOT NULL, body TEXT)")
	docs, _ := fencesql.NewTable(fencesql.MySQL, name+".Do`cs", "id", "tok", "body")
	ctx := context.Background()
	if err := docs.Write(ctx, b.db, 1, 3, "x"); err != nil {
		t.Fatal(err)
	}
	fencetest.WantStale(t, docs.Write(ctx, b.db, 1, 2, "y"), "1", 2, 3)
	var body string
	if err := b.db.QueryRow("SELECT body FROM `Do``cs` WHERE id = 1").Scan(&body); err != nil || body != "x" {
		t.Errorf("body = %q, %v; want x", body, err)
	}
}

// TestMySQLResourceLength: the tokens table holds resource names of up to
// MySQLResourceMax bytes; a longer one is refused before anything runs.
func TestMySQLResourceLength(t *testing.T) {
	db := openMySQL(t, "")
	ctx := context.Background()
	tokens, _ := fencesql.NewTokens(fencesql.MySQL, "fence_tokens")
	if err := tokens.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	longest := strings.Repeat("é", fencesql.MySQLResourceMax/2) // 2 bytes each
	nop := func(*sql.Tx) error { return nil }
	if err := tokens.Do(ctx, db, longest, 3, nop); err != nil {
		t.Fatalf("resource of %d bytes: %v", len(longest), err)
	}
	if h, ok, err := tokens.Highest(ctx, db, longest); h != 3 || !ok || err != nil {
		t.Fatalf("Highest = %d, %v, %v; want 3", h, ok, err)
	}
	called := false
	if err := tokens.Do(ctx, db, longest+"x", 4, func(*sql.Tx) error { called = true; return nil }); !errors.Is(err, fencesql.ErrResourceLength) || called {
		t.Errorf("Do with a resource of %d bytes: %v, write called %v; want ErrResourceLength, not called", len(longest)+1, err, called)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tokens.Admit(ctx, tx, longest+"x", 4); !errors.Is(err, fencesql.ErrResourceLength) {
		t.Errorf("Admit with a resource of %d bytes: %v, want ErrResourceLength", len(longest)+1, err)
	}
}

// TestMySQLAdmitAfterSnapshot: a REPEATABLE READ transaction (InnoDB's
// default) that read the tokens before a higher token was admitted still
// sees that token when it admits its own, and is refused: the check reads
// the newest row, not the transaction's snapshot. The same for a Table.
func TestMySQLAdmitAfterSnapshot(t *testing.T) {
	for _, params := range []string{"", "clientFoundRows=true"} {
		t.Run("params="+params, func(t *testing.T) {
			b := backend{fencesql.MySQL, openMySQL(t, params)}
			ctx := context.Background()
			tokens, _ := fencesql.NewTokens(fencesql.MySQL, "fence_tokens")
			if err := tokens.CreateTable(ctx, b.db); err != nil {
				t.Fatal(err)
			}
			b.exec(t, `CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)`)
			docs, _ := fencesql.NewTable(fencesql.MySQL, "docs", "id", "token", "body")
			nop := func(*sql.Tx) error { return nil }
			if err := tokens.Do(ctx, b.db, "r", 5, nop); err != nil {
				t.Fatal(err)
			}
			if err := docs.Write(ctx, b.db, "d", 5, "five"); err != nil {
				t.Fatal(err)
			}
			tx, err := b.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var seen int64
			var body string
			if err := tx.QueryRow(`SELECT token FROM fence_tokens WHERE resource = 'r'`).Scan(&seen); err != nil || seen != 5 {
				t.Fatalf("snapshot read: %d, %v", seen, err)
			}
			if err := tx.QueryRow(`SELECT body FROM docs WHERE id = 'd'`).Scan(&body); err != nil || body != "five" {
				t.Fatalf("snapshot read: %q, %v", body, err)
			}
			if err := tokens.Do(ctx, b.db, "r", 9, nop); err != nil {
				t.Fatal(err)
			}
			if err := docs.Write(ctx, b.db, "d", 9, "nine"); err != nil {
				t.Fatal(err)
			}
			fencetest.WantStale(t, tokens.Admit(ctx, tx, "r", 7), "r", 7, 9)
			fencetest.WantStale(t, docs.Write(ctx, tx, "d", 7, "seven"), "d", 7, 9)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := b.db.QueryRow(`SELECT body FROM docs WHERE id = 'd'`).Scan(&body); err != nil || body != "nine" {
				t.Errorf("body = %q, %v; want nine", body, err)
			}
		})
	}
}

// TestMySQLWriteOnConn: Write on a *sql.Conn outside a transaction runs in
// that session (it is not a pool, so Write begins no transaction of its
// own, which in MySQL would commit one the caller began with BEGIN).
func TestMySQLWriteOnConn(t *testing.T) {
	b := backend{fencesql.MySQL, openMySQL(t, "")}
	ctx := context.Background()
	b.exec(t, `CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)`,
		`CREATE TABLE notes (note TEXT)`)
	docs, _ := fencesql.NewTable(fencesql.MySQL, "docs", "id", "token", "body")
	conn, err := b.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := docs.Write(ctx, conn, "a", 4, "four"); err != nil {
		t.Fatal(err)
	}
	fencetest.WantStale(t, docs.Write(ctx, conn, "a", 3, "three"), "a", 3, 4)
	// A transaction begun with SQL on the connection stays the caller's.
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO notes VALUES ('in the transaction')`); err != nil {
		t.Fatal(err)
	}
	if err := docs.Write(ctx, conn, "a", 5, "five"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	var body string
	var notes int
	if err := b.db.QueryRow(`SELECT body FROM docs WHERE id = 'a'`).Scan(&body); err != nil || body != "four" {
		t.Errorf("body = %q, %v; want four (the write with 5 rolled back)", body, err)
	}
	if err := b.db.QueryRow(`SELECT count(*) FROM notes`).Scan(&notes); err != nil || notes != 0 {
		t.Errorf("%d notes, %v; want 0 (rolled back)", notes, err)
	}
}
