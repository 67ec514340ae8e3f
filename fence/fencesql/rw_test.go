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

// rwCases are fencetest's scripted histories, with the largest tokens a
// BIGINT holds.
var rwCases = append(fencetest.RWCases(), fencetest.RWCase{
	Name: "large tokens",
	Steps: []fencetest.RWStep{fencetest.Write(1<<53+1, 0), fencetest.Read(1<<53, 1<<53+1), fencetest.Read(1<<63-1, 0),
		fencetest.Write(1<<63-2, 1<<63-1), fencetest.Write(1<<63-1, 0)},
	WantW: 1<<63 - 1, WantH: 1<<63 - 1,
})

// newRW creates the RW tokens table and a table doc (id, body) whose body a
// write sets to its token.
func newRW(t *testing.T, b backend) *fencesql.RWTokens {
	t.Helper()
	rw, err := fencesql.NewRWTokens(b.dialect, "rw_tokens")
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.CreateTable(context.Background(), b.db); err != nil {
		t.Fatal(err)
	}
	b.exec(t, `CREATE TABLE doc (id TEXT PRIMARY KEY, body BIGINT NOT NULL)`)
	return rw
}

// readDoc and writeDoc are the guarded operations: a read of resource r's
// body (0 if none) and a write of it.
func readDoc(ctx context.Context, tx *sql.Tx, r string, body *uint64) error {
	var v int64
	err := tx.QueryRowContext(ctx, `SELECT body FROM doc WHERE id = '`+r+`'`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		*body = 0
		return nil
	}
	*body = uint64(v)
	return err
}

func writeDoc(ctx context.Context, tx *sql.Tx, r string, token uint64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM doc WHERE id = '`+r+`'`); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO doc (id, body) VALUES ('%s', %d)`, r, int64(token)))
	return err
}

// TestRWTokensCases runs the scripted histories with DoRead and DoWrite:
// every admitted read sees the last admitted write, and a refused
// operation runs nothing.
func TestRWTokensCases(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		rw := newRW(t, b)
		for i, tc := range rwCases {
			t.Run(tc.Name, func(t *testing.T) {
				r := fmt.Sprintf("doc%d", i)
				if _, _, ok, err := rw.Tokens(ctx, b.db, r); ok || err != nil {
					t.Fatalf("Tokens of a new resource: %v, %v", ok, err)
				}
				var last uint64
				for j, st := range tc.Steps {
					ran := false
					var got uint64
					var err error
					if st.Write {
						err = rw.DoWrite(ctx, b.db, r, st.Token, func(tx *sql.Tx) error {
							ran = true
							return writeDoc(ctx, tx, r, st.Token)
						})
					} else {
						err = rw.DoRead(ctx, b.db, r, st.Token, func(tx *sql.Tx) error {
							ran = true
							return readDoc(ctx, tx, r, &got)
						})
					}
					if st.StaleOver != 0 {
						if ran {
							t.Fatalf("step %d: refused operation ran", j)
						}
						fencetest.WantStale(t, err, r, st.Token, st.StaleOver)
						continue
					}
					if err != nil || !ran {
						t.Fatalf("step %d (write %v, token %d): %v, ran %v", j, st.Write, st.Token, err, ran)
					}
					if st.Write {
						last = st.Token
					} else if got != last {
						t.Fatalf("step %d: read %d saw %d, want %d", j, st.Token, got, last)
					}
				}
				w, h, ok, err := rw.Tokens(ctx, b.db, r)
				if w != tc.WantW || h != tc.WantH || !ok || err != nil {
					t.Errorf("Tokens = %d, %d, %v, %v; want W %d, H %d", w, h, ok, err, tc.WantW, tc.WantH)
				}
			})
		}
	})
}

// TestRWTokensAdmit: AdmitRead and AdmitWrite in the caller's
// transaction, and on the pool itself; a failed or rolled back transaction
// records nothing; tokens above a BIGINT and, with MySQL, long names are
// refused.
func TestRWTokensAdmit(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		rw := newRW(t, b)
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(rw.AdmitWrite(ctx, b.db, "r", 5))
		must(rw.AdmitRead(ctx, b.db, "r", 8))
		fencetest.WantStale(t, rw.AdmitWrite(ctx, b.db, "r", 7), "r", 7, 8)
		fencetest.WantStale(t, rw.AdmitRead(ctx, b.db, "r", 4), "r", 4, 5)

		tx, err := b.db.BeginTx(ctx, nil)
		must(err)
		must(rw.AdmitWrite(ctx, tx, "r", 10))
		must(rw.AdmitRead(ctx, tx, "r", 10))
		must(tx.Rollback())
		if w, h, _, _ := rw.Tokens(ctx, b.db, "r"); w != 5 || h != 8 {
			t.Fatalf("after a rolled back write: W, H = %d, %d; want 5, 8", w, h)
		}
		boom := errors.New("query failed")
		if err := rw.DoRead(ctx, b.db, "r", 9, func(*sql.Tx) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("DoRead: %v, want the read's error", err)
		}
		if err := rw.DoWrite(ctx, b.db, "r", 11, func(*sql.Tx) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("DoWrite: %v, want the write's error", err)
		}
		if w, h, _, _ := rw.Tokens(ctx, b.db, "r"); w != 5 || h != 8 {
			t.Fatalf("after failed operations: W, H = %d, %d; want 5, 8", w, h)
		}
		if err := rw.AdmitRead(ctx, b.db, "r", 1<<63); !errors.Is(err, fencesql.ErrTokenRange) {
			t.Errorf("token 2^63: %v, want ErrTokenRange", err)
		}
		if err := rw.DoWrite(ctx, b.db, "r", 1<<63, func(*sql.Tx) error { return nil }); !errors.Is(err, fencesql.ErrTokenRange) {
			t.Errorf("token 2^63: %v, want ErrTokenRange", err)
		}
		long := strings.Repeat("x", fencesql.MySQLResourceMax+1)
		err = rw.AdmitRead(ctx, b.db, long, 1)
		if b.dialect == fencesql.MySQL && !errors.Is(err, fencesql.ErrResourceLength) {
			t.Errorf("MySQL, a name of %d bytes: %v, want ErrResourceLength", len(long), err)
		} else if b.dialect != fencesql.MySQL && err != nil {
			t.Errorf("a name of %d bytes: %v", len(long), err)
		}
	})
}

func TestRWTokensDefinition(t *testing.T) {
	if _, err := fencesql.NewRWTokens(fencesql.Dialect(9), "t"); !errors.Is(err, fencesql.ErrDefinition) {
		t.Errorf("unknown dialect: %v", err)
	}
	if _, err := fencesql.NewRWTokens(fencesql.Postgres, ""); !errors.Is(err, fencesql.ErrDefinition) {
		t.Errorf("empty name: %v", err)
	}
}

// TestRWTokensConcurrent runs a read-write lock's history at once: tokens
// 1..n granted in order, about a third to writers (never two in a row, and
// the newest), every holder reading (a writer also writing) many times, each starting a
// little after the one before. Each admitted operation appends its token to
// a log in its transaction; the admission locks the resource's row until
// commit, so the log's order is the order in which they took effect. It
// must keep the order of the tokens, every read must see the last write
// before it, and every refusal must have had a reason (an operation with a
// higher token took effect; for a reader, a write).
func TestRWTokensConcurrent(t *testing.T) {
	const holders, ops = 10, 15
	eachBackend(t, func(t *testing.T, b backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		rw := newRW(t, b)
		oplog := `CREATE TABLE oplog (seq INTEGER PRIMARY KEY AUTOINCREMENT, token BIGINT NOT NULL, is_write INT NOT NULL, saw BIGINT NOT NULL)`
		switch b.dialect {
		case fencesql.Postgres:
			oplog = `CREATE TABLE oplog (seq BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL, is_write INT NOT NULL, saw BIGINT NOT NULL)`
		case fencesql.MySQL:
			oplog = `CREATE TABLE oplog (seq BIGINT AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL, is_write INT NOT NULL, saw BIGINT NOT NULL)`
		}
		b.exec(t, oplog)
		// The row exists before the holders start: InnoDB may answer
		// concurrent first inserts of one key with a deadlock (1213), which
		// is not what this test is about (TestRWTokensCases starts from
		// fresh rows). Token 0 changes nothing for them.
		if err := rw.AdmitRead(ctx, b.db, "doc", 0); err != nil {
			t.Fatal(err)
		}
		logOp := func(tx *sql.Tx, token uint64, write bool, saw uint64) error {
			w := 0
			if write {
				w = 1
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO oplog (token, is_write, saw) VALUES (%d, %d, %d)`, token, w, saw))
			return err
		}
		writers := fencetest.RWWriters(holders)
		refused := fencetest.RWHolders(t, holders, ops, writers, func(write bool, token uint64) error {
			if write {
				return rw.DoWrite(ctx, b.db, "doc", token, func(tx *sql.Tx) error {
					if err := writeDoc(ctx, tx, "doc", token); err != nil {
						return err
					}
					return logOp(tx, token, true, token)
				})
			}
			return rw.DoRead(ctx, b.db, "doc", token, func(tx *sql.Tx) error {
				var saw uint64
				if err := readDoc(ctx, tx, "doc", &saw); err != nil {
					return err
				}
				return logOp(tx, token, false, saw)
			})
		})

		rows, err := b.db.QueryContext(ctx, `SELECT token, is_write, saw FROM oplog ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		// A read must also have seen the last write before it.
		var landed []fencetest.RWStep
		var maxW uint64
		for rows.Next() {
			var tok, isWrite, saw int64
			if err := rows.Scan(&tok, &isWrite, &saw); err != nil {
				t.Fatal(err)
			}
			token := uint64(tok)
			landed = append(landed, fencetest.RWStep{Write: isWrite == 1, Token: token})
			switch {
			case isWrite == 1:
				maxW = max(maxW, token)
			case uint64(saw) != maxW && token >= maxW:
				t.Fatalf("read %d saw %d, want the last write %d", token, saw, maxW)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		fencetest.CheckRWHistory(t, landed, refused, holders, ops, writers)
	})
}
