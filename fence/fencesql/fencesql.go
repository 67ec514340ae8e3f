package fencesql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fencerlock/fencer/fence"
)

// Errors returned by this package, besides *fence.StaleTokenError for a
// refused write.
var (
	// ErrTokenRange means a token is above 1<<63-1 and cannot be stored in
	// a BIGINT column.
	ErrTokenRange = errors.New("fencesql: token out of range")
	// ErrDefinition means a Table or Tokens was defined with an empty name
	// or with the wrong number of values.
	ErrDefinition = errors.New("fencesql: bad definition")
)

// Dialect says how a database writes query placeholders.
type Dialect int

const (
	// Postgres numbers its placeholders $1, $2, …
	Postgres Dialect = iota
	// SQLite also takes numbered placeholders, written ?1, ?2, …
	SQLite
)

func (d Dialect) placeholder(n int) string {
	if d == SQLite {
		return "?" + strconv.Itoa(n)
	}
	return "$" + strconv.Itoa(n)
}

// Execer is what runs the statements: a *sql.DB, *sql.Conn or *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// quote quotes a possibly schema-qualified identifier for both dialects:
// "schema"."table".
func quote(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, ".")
}

// toBigint converts a token for a BIGINT column.
func toBigint(token uint64) (int64, error) {
	if token > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %d does not fit a BIGINT", ErrTokenRange, token)
	}
	return int64(token), nil
}

// upsert builds INSERT INTO table (key, token, cols…) VALUES (…) ON CONFLICT
// (key) DO UPDATE SET token = new token, cols… WHERE stored token <= new
// token: one statement that inserts the row, or updates it if the token
// allows, or does nothing (no row affected).
func upsert(d Dialect, table, key, token string, cols []string) string {
	all := append([]string{key, token}, cols...)
	names := make([]string, len(all))
	marks := make([]string, len(all))
	for i, c := range all {
		names[i] = quote(c)
		marks[i] = d.placeholder(i + 1)
	}
	sets := make([]string, 0, len(all)-1)
	for _, c := range all[1:] {
		sets = append(sets, quote(c)+" = excluded."+quote(c))
	}
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s WHERE %s.%s <= excluded.%s",
		quote(table), strings.Join(names, ", "), strings.Join(marks, ", "), quote(key),
		strings.Join(sets, ", "), quote(table), quote(token), quote(token))
}

// fencedWrite runs an upsert built by upsert and turns "no row affected" into
// a *fence.StaleTokenError, reading the token that refused it with sel.
func fencedWrite(ctx context.Context, db Execer, up, sel string, resource string, key any, token uint64, values []any) error {
	tok, err := toBigint(token)
	if err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, up, append([]any{key, tok}, values...)...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	var highest int64
	if err := db.QueryRowContext(ctx, sel, key).Scan(&highest); err != nil {
		return fmt.Errorf("fencesql: write with token %d to %q was refused; reading the token that refused it: %w", token, resource, err)
	}
	return &fence.StaleTokenError{Resource: resource, Token: token, Highest: uint64(highest)}
}

// Table is a table whose rows each carry their own fencing token: a key
// column (its primary key, or another unique column), a BIGINT token column,
// and the data columns that Write sets.
type Table struct {
	name       string
	up, sel    string
	numColumns int
}

// NewTable describes the table name (which may be schema-qualified) with the
// given key and token columns, whose Write sets the given data columns. It
// does not create the table.
func NewTable(d Dialect, name, keyColumn, tokenColumn string, columns ...string) (*Table, error) {
	for _, n := range append([]string{name, keyColumn, tokenColumn}, columns...) {
		if n == "" {
			return nil, fmt.Errorf("%w: empty table or column name", ErrDefinition)
		}
	}
	return &Table{
		name:       name,
		up:         upsert(d, name, keyColumn, tokenColumn, columns),
		sel:        fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", quote(tokenColumn), quote(name), quote(keyColumn), d.placeholder(1)),
		numColumns: len(columns),
	}, nil
}

// Write inserts the row with the given key, or updates it if its token
// column holds at most token, in one statement; values go to the data
// columns, in the order NewTable named them, and token to the token column.
// If the row holds a higher token, nothing changes and Write returns a
// *fence.StaleTokenError whose Resource is the key in decimal or text form.
//
// db may be a transaction: the write is then part of it (and a refusal
// leaves it usable).
func (t *Table) Write(ctx context.Context, db Execer, key any, token uint64, values ...any) error {
	if len(values) != t.numColumns {
		return fmt.Errorf("%w: %d values for %d columns of %s", ErrDefinition, len(values), t.numColumns, t.name)
	}
	return fencedWrite(ctx, db, t.up, t.sel, fmt.Sprint(key), key, token, values)
}

// Tokens is a table that keeps the highest admitted token of each resource,
// for writes that a single row cannot carry: several rows or tables,
// deletions, anything a transaction can do.
type Tokens struct {
	name         string
	up, sel, ddl string
}

// NewTokens describes the tokens table name (which may be schema-qualified).
// Its columns are resource (TEXT, primary key) and token (BIGINT); call
// CreateTable to create it.
func NewTokens(d Dialect, name string) (*Tokens, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty table name", ErrDefinition)
	}
	return &Tokens{
		name: name,
		up:   upsert(d, name, "resource", "token", nil),
		sel:  fmt.Sprintf(`SELECT "token" FROM %s WHERE "resource" = %s`, quote(name), d.placeholder(1)),
		ddl:  fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s ("resource" TEXT PRIMARY KEY, "token" BIGINT NOT NULL)`, quote(name)),
	}, nil
}

// CreateTable creates the tokens table if it does not exist.
func (t *Tokens) CreateTable(ctx context.Context, db Execer) error {
	_, err := db.ExecContext(ctx, t.ddl)
	return err
}

// Admit records token as the highest for resource, inside the caller's
// transaction tx, if it is at least the highest recorded; otherwise it
// returns a *fence.StaleTokenError and the caller must roll back. Admit the
// token before the writes it guards: the row it writes stays locked until tx
// ends, so writers of the same resource take turns, in token order.
func (t *Tokens) Admit(ctx context.Context, tx Execer, resource string, token uint64) error {
	return fencedWrite(ctx, tx, t.up, t.sel, resource, resource, token, nil)
}

// Do runs write in a transaction on db that first admits token for resource
// (see Admit), and commits it if write returns nil. A stale token, an error
// from write or a failed commit rolls everything back and is returned; so
// does a panic in write, which Do re-raises.
func (t *Tokens) Do(ctx context.Context, db *sql.DB, resource string, token uint64, write func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	if err := t.Admit(ctx, tx, resource, token); err != nil {
		return err
	}
	if err := write(tx); err != nil {
		return err
	}
	committed = true
	return tx.Commit()
}

// Highest returns the highest token recorded for resource, and false if
// none is.
func (t *Tokens) Highest(ctx context.Context, db Execer, resource string) (uint64, bool, error) {
	var h int64
	err := db.QueryRowContext(ctx, t.sel, resource).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return uint64(h), true, nil
}
