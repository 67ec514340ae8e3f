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
	// ErrDefinition means a Table or Tokens was defined with an empty name,
	// an unknown Dialect or the wrong number of values.
	ErrDefinition = errors.New("fencesql: bad definition")
	// ErrResourceLength means a resource name is longer than the tokens
	// table's resource column holds (MySQL only: MySQLResourceMax bytes).
	ErrResourceLength = errors.New("fencesql: resource name too long")
)

// Dialect says how a database writes query placeholders, quotes names and
// spells the conditional write.
type Dialect int

const (
	// Postgres numbers its placeholders $1, $2, …
	Postgres Dialect = iota
	// SQLite also takes numbered placeholders, written ?1, ?2, …
	SQLite
	// MySQL covers MySQL (5.7, 8 and later) and MariaDB (10.x): ?
	// placeholders, `backtick` quoting, and INSERT … ON DUPLICATE KEY UPDATE
	// followed by a read of the stored token in the same transaction (see
	// package doc). Its tables must be InnoDB.
	MySQL
)

// MySQLResourceMax is the longest resource name, in bytes, that a MySQL
// tokens table holds: its resource column is VARBINARY(512), a key that fits
// every InnoDB row format's index limit. A longer name is refused with
// ErrResourceLength before it reaches the database.
const MySQLResourceMax = 512

func (d Dialect) valid() bool { return d >= Postgres && d <= MySQL }

func (d Dialect) placeholder(n int) string {
	switch d {
	case SQLite:
		return "?" + strconv.Itoa(n)
	case MySQL:
		return "?"
	}
	return "$" + strconv.Itoa(n)
}

// quote quotes a possibly schema-qualified identifier part by part:
// "schema"."table", or `schema`.`table` for MySQL.
func (d Dialect) quote(name string) string {
	q := `"`
	if d == MySQL {
		q = "`"
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + strings.ReplaceAll(p, q, q+q) + q
	}
	return strings.Join(parts, ".")
}

// Execer is what runs the statements: a *sql.DB, *sql.Conn or *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// toBigint converts a token for a BIGINT column.
func toBigint(token uint64) (int64, error) {
	if token > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %d does not fit a BIGINT", ErrTokenRange, token)
	}
	return int64(token), nil
}

// fencedWrite is the conditional write of one row of one table, and how to
// tell whether it was admitted.
type fencedWrite struct {
	dialect Dialect
	// up inserts the row, or updates it if its stored token is at most the
	// new one, or leaves it as it is.
	up string
	// sel reads the row's stored token, given the key. For MySQL it is a
	// locking read (FOR UPDATE), which reads the newest version of the row
	// whatever the transaction's snapshot.
	sel string
}

// newFencedWrite builds the statements for table, whose rows are found by
// key and carry their token in the token column, and whose write sets cols.
func newFencedWrite(d Dialect, table, key, token string, cols []string) fencedWrite {
	w := fencedWrite{
		dialect: d,
		sel:     fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", d.quote(token), d.quote(table), d.quote(key), d.placeholder(1)),
	}
	if d == MySQL {
		w.up = mysqlUpsert(table, key, token, cols)
		w.sel += " FOR UPDATE"
	} else {
		w.up = upsert(d, table, key, token, cols)
	}
	return w
}

// upsert builds INSERT INTO table (key, token, cols…) VALUES (…) ON CONFLICT
// (key) DO UPDATE SET token = new token, cols… WHERE stored token <= new
// token: one statement that inserts the row, or updates it if the token
// allows, or does nothing (no row affected). PostgreSQL and SQLite.
func upsert(d Dialect, table, key, token string, cols []string) string {
	all := append([]string{key, token}, cols...)
	names := make([]string, len(all))
	marks := make([]string, len(all))
	for i, c := range all {
		names[i] = d.quote(c)
		marks[i] = d.placeholder(i + 1)
	}
	sets := make([]string, 0, len(all)-1)
	for _, c := range all[1:] {
		sets = append(sets, d.quote(c)+" = excluded."+d.quote(c))
	}
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s WHERE %s.%s <= excluded.%s",
		d.quote(table), strings.Join(names, ", "), strings.Join(marks, ", "), d.quote(key),
		strings.Join(sets, ", "), d.quote(table), d.quote(token), d.quote(token))
}

// mysqlUpsert builds MySQL's form of upsert. ON DUPLICATE KEY UPDATE has no
// WHERE, so each column is set to IF(stored token <= new token, new value,
// stored value): a refused write sets the row to what it holds.
//
// The token column is assigned last. MySQL evaluates the assignments left
// to right, each seeing the columns assigned before it, so last, every IF
// compares the stored token with the new one. (First would happen to decide
// the same: an admitted token then compares with itself and passes, a
// refused one leaves the stored token; but a later change to the condition,
// say to <, would break.) MariaDB's SIMULTANEOUS_ASSIGNMENT mode, in which
// all see the stored row, gives the same result.
//
// VALUES(col), the value the INSERT would have written, is deprecated since
// MySQL 8.0.20 in favour of a row alias (INSERT … AS new … new.col), which
// MariaDB does not have; VALUES() is the form both understand.
func mysqlUpsert(table, key, token string, cols []string) string {
	d := MySQL
	all := append([]string{key, token}, cols...)
	names := make([]string, len(all))
	marks := make([]string, len(all))
	for i, c := range all {
		names[i] = d.quote(c)
		marks[i] = "?"
	}
	tok := d.quote(token)
	admit := fmt.Sprintf("%s <= VALUES(%s)", tok, tok)
	sets := make([]string, 0, len(all)-1)
	for _, c := range append(all[2:], token) { // all[2:] is cols, copied
		q := d.quote(c)
		sets = append(sets, fmt.Sprintf("%s = IF(%s, VALUES(%s), %s)", q, admit, q, q))
	}
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s) ON DUPLICATE KEY UPDATE %s",
		d.quote(table), strings.Join(names, ", "), strings.Join(marks, ", "), strings.Join(sets, ", "))
}

// run makes the write on db. A refusal is a *fence.StaleTokenError.
func (w fencedWrite) run(ctx context.Context, db Execer, resource string, key any, token uint64, values []any) error {
	tok, err := toBigint(token)
	if err != nil {
		return err
	}
	args := append([]any{key, tok}, values...)
	if w.dialect == MySQL {
		return w.runMySQL(ctx, db, resource, key, token, args)
	}
	res, err := db.ExecContext(ctx, w.up, args...)
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
	if err := db.QueryRowContext(ctx, w.sel, key).Scan(&highest); err != nil {
		return fmt.Errorf("fencesql: write with token %d to %q was refused; reading the token that refused it: %w", token, resource, err)
	}
	return &fence.StaleTokenError{Resource: resource, Token: token, Highest: uint64(highest)}
}

// runMySQL makes the write on db inside a transaction: one begun and
// committed here if db is a *sql.DB, else the session's own (a *sql.Tx, or a
// *sql.Conn whose transaction the caller began; beginning one here would
// commit the caller's, as MySQL's START TRANSACTION does).
//
// MySQL's rows-affected count cannot say whether the upsert was admitted.
// By default it is 1 for an insert, 2 for an update that changed the row,
// and 0 for a row left as it was, which is both a refused write and an
// admitted one that wrote the values the row already held (equal token,
// same data: a holder repeating its write, which must be admitted). With
// CLIENT_FOUND_ROWS (go-sql-driver/mysql's clientFoundRows=true) a row left
// as it was counts 1, like an insert. And a trigger that changes the row
// makes a refused write count 2.
//
// So the count is not used. After the upsert, the transaction reads the
// row's token with a locking read. The upsert locked the row (InnoDB locks
// the duplicate row it finds, and the row it inserts, until the transaction
// ends, whether or not it changes it), so nobody has written it since, and
// the locking read sees the newest version, not the transaction's snapshot.
// An admitted write stored our token; a refused one left the stored token,
// which is higher. Hence: admitted iff the token read equals ours, and a
// refusal's Highest is the token read. Outside a transaction (a *sql.Conn in
// autocommit mode) the read races with other writers, and a write overtaken
// by a higher token between the two statements is reported refused although
// it landed, before the higher one replaced it; a refused write is never
// reported admitted.
func (w fencedWrite) runMySQL(ctx context.Context, db Execer, resource string, key any, token uint64, args []any) error {
	pool, ok := db.(*sql.DB)
	if !ok {
		return w.upsertAndCheck(ctx, db, resource, key, token, args)
	}
	tx, err := pool.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := w.upsertAndCheck(ctx, tx, resource, key, token, args); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// upsertAndCheck runs the upsert and the locking read in the transaction tx
// (see runMySQL).
func (w fencedWrite) upsertAndCheck(ctx context.Context, tx Execer, resource string, key any, token uint64, args []any) error {
	if _, err := tx.ExecContext(ctx, w.up, args...); err != nil {
		return err
	}
	var stored int64
	if err := tx.QueryRowContext(ctx, w.sel, key).Scan(&stored); err != nil {
		return fmt.Errorf("fencesql: reading back the token of %q after writing it with token %d: %w", resource, token, err)
	}
	switch {
	case stored >= 0 && uint64(stored) == token:
		return nil
	case stored >= 0 && uint64(stored) > token:
		return &fence.StaleTokenError{Resource: resource, Token: token, Highest: uint64(stored)}
	}
	return fmt.Errorf("fencesql: after writing %q with token %d, its row holds token %d: something else writes the token column", resource, token, stored)
}

// Table is a table whose rows each carry their own fencing token: a key
// column (its primary key, or another unique column), a BIGINT token column,
// and the data columns that Write sets.
type Table struct {
	name       string
	write      fencedWrite
	numColumns int
}

// NewTable describes the table name (which may be schema-qualified) with the
// given key and token columns, whose Write sets the given data columns. It
// does not create the table.
//
// With MySQL, the key must be the table's only unique key (ON DUPLICATE KEY
// UPDATE acts on a clash with any of them) and the table must be InnoDB.
func NewTable(d Dialect, name, keyColumn, tokenColumn string, columns ...string) (*Table, error) {
	if !d.valid() {
		return nil, fmt.Errorf("%w: unknown dialect %d", ErrDefinition, d)
	}
	for _, n := range append([]string{name, keyColumn, tokenColumn}, columns...) {
		if n == "" {
			return nil, fmt.Errorf("%w: empty table or column name", ErrDefinition)
		}
	}
	return &Table{
		name:       name,
		write:      newFencedWrite(d, name, keyColumn, tokenColumn, columns),
		numColumns: len(columns),
	}, nil
}

// Write inserts the row with the given key, or updates it if its token
// column holds at most token; values go to the data columns, in the order
// NewTable named them, and token to the token column. If the row holds a
// higher token, nothing changes and Write returns a *fence.StaleTokenError
// whose Resource is the key in decimal or text form.
//
// db may be a transaction: the write is then part of it (and a refusal
// leaves it usable). Otherwise Write is one statement with PostgreSQL and
// SQLite; with MySQL, on a *sql.DB, it is a transaction of its own (the
// upsert and a read of the stored token, see the package doc), and on a
// *sql.Conn it runs in the connection's session as it is: give it a
// transaction, or a write overtaken by a higher token between the two
// statements may be reported refused although it landed first.
func (t *Table) Write(ctx context.Context, db Execer, key any, token uint64, values ...any) error {
	if len(values) != t.numColumns {
		return fmt.Errorf("%w: %d values for %d columns of %s", ErrDefinition, len(values), t.numColumns, t.name)
	}
	return t.write.run(ctx, db, fmt.Sprint(key), key, token, values)
}

// Tokens is a table that keeps the highest admitted token of each resource,
// for writes that a single row cannot carry: several rows or tables,
// deletions, anything a transaction can do.
type Tokens struct {
	name    string
	dialect Dialect
	write   fencedWrite
	sel     string // a plain read of a resource's token
	ddl     string
}

// NewTokens describes the tokens table name (which may be schema-qualified).
// Its columns are resource (the primary key: TEXT, or VARBINARY of
// MySQLResourceMax bytes with MySQL) and token (BIGINT); call CreateTable to
// create it.
func NewTokens(d Dialect, name string) (*Tokens, error) {
	if !d.valid() {
		return nil, fmt.Errorf("%w: unknown dialect %d", ErrDefinition, d)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: empty table name", ErrDefinition)
	}
	// MySQL cannot make a TEXT column a key without a prefix length. A
	// VARBINARY key compares bytes, as the other databases compare TEXT
	// here: no collation folds case, accents or trailing spaces, which
	// would merge distinct resources into one.
	ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s TEXT PRIMARY KEY, %s BIGINT NOT NULL)",
		d.quote(name), d.quote("resource"), d.quote("token"))
	if d == MySQL {
		ddl = fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s VARBINARY(%d) NOT NULL PRIMARY KEY, %s BIGINT NOT NULL) ENGINE=InnoDB",
			d.quote(name), d.quote("resource"), MySQLResourceMax, d.quote("token"))
	}
	return &Tokens{
		name:    name,
		dialect: d,
		write:   newFencedWrite(d, name, "resource", "token", nil),
		sel:     fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", d.quote("token"), d.quote(name), d.quote("resource"), d.placeholder(1)),
		ddl:     ddl,
	}, nil
}

// CreateTable creates the tokens table if it does not exist.
func (t *Tokens) CreateTable(ctx context.Context, db Execer) error {
	_, err := db.ExecContext(ctx, t.ddl)
	return err
}

// checkResource refuses a resource name that a token table of dialect d
// cannot hold whole: MySQL outside its strict mode would cut it short, and
// two names that share the first MySQLResourceMax bytes would then share a
// token.
func checkResource(d Dialect, resource string) error {
	if d == MySQL && len(resource) > MySQLResourceMax {
		return fmt.Errorf("%w: %d bytes, the most is %d", ErrResourceLength, len(resource), MySQLResourceMax)
	}
	return nil
}

// admitThenRun runs admit and then op in one transaction on db, after
// checking resource (for dialect d) and token, and commits if both return
// nil; anything else, a panic included, rolls the transaction back.
func admitThenRun(ctx context.Context, db *sql.DB, d Dialect, resource string, token uint64, admit, op func(*sql.Tx) error) error {
	if err := checkResource(d, resource); err != nil {
		return err
	}
	if _, err := toBigint(token); err != nil {
		return err
	}
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
	if err := admit(tx); err != nil {
		return err
	}
	if err := op(tx); err != nil {
		return err
	}
	committed = true
	return tx.Commit()
}

// Admit records token as the highest for resource, inside the caller's
// transaction tx, if it is at least the highest recorded; otherwise it
// returns a *fence.StaleTokenError and the caller must roll back. Admit the
// token before the writes it guards: the row it writes stays locked until tx
// ends, so writers of the same resource take turns, in token order.
func (t *Tokens) Admit(ctx context.Context, tx Execer, resource string, token uint64) error {
	if err := checkResource(t.dialect, resource); err != nil {
		return err
	}
	return t.write.run(ctx, tx, resource, resource, token, nil)
}

// Do runs write in a transaction on db that first admits token for resource
// (see Admit), and commits it if write returns nil. A stale token, an error
// from write or a failed commit rolls everything back and is returned; so
// does a panic in write, which Do re-raises.
func (t *Tokens) Do(ctx context.Context, db *sql.DB, resource string, token uint64, write func(*sql.Tx) error) error {
	return admitThenRun(ctx, db, t.dialect, resource, token, func(tx *sql.Tx) error {
		return t.Admit(ctx, tx, resource, token)
	}, write)
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
