package fencesql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fencerlock/fencer/fence"
)

// RWTokens is a table that keeps, for each resource guarded by a read-write
// lock, the two tokens of the read-write rule (see fence.RWValidator): W,
// the highest token of an admitted write (column writer, 0 if none), and H,
// the highest token of any admitted read or write (column highest). A read
// is admitted if its token is at least W, and raises H; a write if its
// token is at least H, and sets W and H.
//
// Each admission is one upsert of the resource's row, as in Tokens, made in
// the transaction of the reads or writes it guards; it locks the row until
// the transaction ends. So the operations on one resource take turns in the
// database, reads included: a read's admission writes H. Keep read
// transactions short.
type RWTokens struct {
	name    string
	dialect Dialect
	read    rwAdmission
	write   rwAdmission
	sel     string // a plain read of a resource's writer and highest
	ddl     string
}

// rwAdmission is the upsert of one kind of operation, and what tells
// whether it was admitted.
type rwAdmission struct {
	dialect Dialect
	write   bool
	// up inserts the resource's row, or updates it if the token is
	// admitted, or leaves it as it is. Arguments: resource, token.
	up string
	// sel reads writer and highest; for MySQL, a locking read.
	sel string
}

// NewRWTokens describes the read-write tokens table name (which may be
// schema-qualified). Its columns are resource (the primary key: TEXT, or
// VARBINARY of MySQLResourceMax bytes with MySQL), writer and highest
// (BIGINT); call CreateTable to create it.
func NewRWTokens(d Dialect, name string) (*RWTokens, error) {
	if !d.valid() {
		return nil, fmt.Errorf("%w: unknown dialect %d", ErrDefinition, d)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: empty table name", ErrDefinition)
	}
	q := d.quote
	table, res, wr, hi := q(name), q("resource"), q("writer"), q("highest")
	ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s TEXT PRIMARY KEY, %s BIGINT NOT NULL, %s BIGINT NOT NULL)", table, res, wr, hi)
	if d == MySQL {
		ddl = fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s VARBINARY(%d) NOT NULL PRIMARY KEY, %s BIGINT NOT NULL, %s BIGINT NOT NULL) ENGINE=InnoDB",
			table, res, MySQLResourceMax, wr, hi)
	}
	sel := fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s = %s", wr, hi, table, res, d.placeholder(1))
	t := &RWTokens{name: name, dialect: d, sel: sel, ddl: ddl}
	t.read = rwAdmission{dialect: d, sel: sel}
	t.write = rwAdmission{dialect: d, write: true, sel: sel}
	if d == MySQL {
		// Assignments run left to right, each seeing those before it: a
		// write's condition reads highest, so highest is assigned last.
		// A read changes highest only. The locking read that follows
		// decides (see runMySQL).
		t.read.sel += " FOR UPDATE"
		t.write.sel += " FOR UPDATE"
		t.read.up = fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (?, 0, ?) ON DUPLICATE KEY UPDATE %s = IF(%s <= VALUES(%s) AND %s < VALUES(%s), VALUES(%s), %s)",
			table, res, wr, hi, hi, wr, hi, hi, hi, hi, hi)
		t.write.up = fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE %s = IF(%s <= VALUES(%s), VALUES(%s), %s), %s = IF(%s <= VALUES(%s), VALUES(%s), %s)",
			table, res, wr, hi, wr, hi, hi, wr, wr, hi, hi, hi, hi, hi)
		return t, nil
	}
	p1, p2 := d.placeholder(1), d.placeholder(2)
	t.read.up = fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%s, 0, %s) ON CONFLICT (%s) DO UPDATE SET %s = CASE WHEN %s.%s < excluded.%s THEN excluded.%s ELSE %s.%s END WHERE %s.%s <= excluded.%s",
		table, res, wr, hi, p1, p2, res, hi, table, hi, hi, hi, table, hi, table, wr, hi)
	t.write.up = fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES (%s, %s, %s) ON CONFLICT (%s) DO UPDATE SET %s = excluded.%s, %s = excluded.%s WHERE %s.%s <= excluded.%s",
		table, res, wr, hi, p1, p2, p2, res, wr, wr, hi, hi, table, hi, hi)
	return t, nil
}

// CreateTable creates the table if it does not exist.
func (t *RWTokens) CreateTable(ctx context.Context, db Execer) error {
	_, err := db.ExecContext(ctx, t.ddl)
	return err
}

// AdmitRead admits a read of resource with token inside the caller's
// transaction tx, raising the resource's H, if token is at least its W;
// otherwise it returns a *fence.StaleTokenError (Highest is W) and the
// caller must roll back. Admit before the reads it guards: the resource's
// row stays locked until tx ends, so no write is admitted meanwhile.
func (t *RWTokens) AdmitRead(ctx context.Context, tx Execer, resource string, token uint64) error {
	return t.admit(ctx, tx, t.read, resource, token)
}

// AdmitWrite admits a write to resource with token inside the caller's
// transaction tx, setting the resource's W and H to token, if token is at
// least its H; otherwise it returns a *fence.StaleTokenError (Highest is H)
// and the caller must roll back. Admit before the writes it guards.
func (t *RWTokens) AdmitWrite(ctx context.Context, tx Execer, resource string, token uint64) error {
	return t.admit(ctx, tx, t.write, resource, token)
}

// DoRead runs read in a transaction on db that first admits a read of
// resource with token (see AdmitRead), and commits it if read returns nil.
// A stale token, an error from read or a failed commit rolls everything
// back (H included) and is returned; so does a panic in read, which DoRead
// re-raises.
func (t *RWTokens) DoRead(ctx context.Context, db *sql.DB, resource string, token uint64, read func(*sql.Tx) error) error {
	return t.do(ctx, db, t.read, resource, token, read)
}

// DoWrite runs write in a transaction on db that first admits a write to
// resource with token (see AdmitWrite), and commits it if write returns
// nil; failures roll back as in DoRead.
func (t *RWTokens) DoWrite(ctx context.Context, db *sql.DB, resource string, token uint64, write func(*sql.Tx) error) error {
	return t.do(ctx, db, t.write, resource, token, write)
}

// Tokens returns the resource's W (0 if no write was admitted) and H, and
// false if no operation on it was admitted.
func (t *RWTokens) Tokens(ctx context.Context, db Execer, resource string) (writer, highest uint64, ok bool, err error) {
	var w, h int64
	err = db.QueryRowContext(ctx, t.sel, resource).Scan(&w, &h)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	return uint64(w), uint64(h), true, nil
}

func (t *RWTokens) do(ctx context.Context, db *sql.DB, a rwAdmission, resource string, token uint64, op func(*sql.Tx) error) error {
	return admitThenRun(ctx, db, t.dialect, resource, token, func(tx *sql.Tx) error {
		return t.admit(ctx, tx, a, resource, token)
	}, op)
}

func (t *RWTokens) admit(ctx context.Context, tx Execer, a rwAdmission, resource string, token uint64) error {
	if err := checkResource(t.dialect, resource); err != nil {
		return err
	}
	tok, err := toBigint(token)
	if err != nil {
		return err
	}
	if a.dialect == MySQL {
		return a.runMySQL(ctx, tx, resource, token, tok)
	}
	res, err := tx.ExecContext(ctx, a.up, resource, tok)
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
	var w, h int64
	if err := tx.QueryRowContext(ctx, a.sel, resource).Scan(&w, &h); err != nil {
		return fmt.Errorf("fencesql: %s with token %d to %q was refused; reading the tokens that refused it: %w", a.kind(), token, resource, err)
	}
	return a.stale(resource, token, w, h)
}

func (a rwAdmission) kind() string {
	if a.write {
		return "write"
	}
	return "read"
}

// stale is the refusal given the row's tokens.
func (a rwAdmission) stale(resource string, token uint64, w, h int64) error {
	bar := w
	if a.write {
		bar = h
	}
	return &fence.StaleTokenError{Resource: resource, Token: token, Highest: uint64(bar)}
}

// runMySQL runs the upsert and a locking read of the row in a transaction:
// tx's own, or one begun and committed here if tx is a *sql.DB (see
// fencedWrite.runMySQL for why the rows-affected count cannot decide). The
// row is locked from the upsert on, so the read shows what the upsert left:
// a read was admitted iff writer <= token (a read does not change writer);
// a write iff highest = token (a refused write leaves a higher one).
func (a rwAdmission) runMySQL(ctx context.Context, db Execer, resource string, token uint64, tok int64) error {
	pool, ok := db.(*sql.DB)
	if !ok {
		return a.upsertAndCheck(ctx, db, resource, token, tok)
	}
	tx, err := pool.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := a.upsertAndCheck(ctx, tx, resource, token, tok); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (a rwAdmission) upsertAndCheck(ctx context.Context, tx Execer, resource string, token uint64, tok int64) error {
	args := []any{resource, tok}
	if a.write {
		args = append(args, tok)
	}
	if _, err := tx.ExecContext(ctx, a.up, args...); err != nil {
		return err
	}
	var w, h int64
	if err := tx.QueryRowContext(ctx, a.sel, resource).Scan(&w, &h); err != nil {
		return fmt.Errorf("fencesql: reading back the tokens of %q after a %s with token %d: %w", resource, a.kind(), token, err)
	}
	switch {
	case w < 0 || h < w:
	case a.write && h == tok && w == tok, !a.write && w <= tok && h >= tok:
		return nil
	case a.write && h > tok, !a.write && w > tok:
		return a.stale(resource, token, w, h)
	}
	return fmt.Errorf("fencesql: after a %s of %q with token %d, its row holds writer %d, highest %d: something else writes the tokens", a.kind(), resource, token, w, h)
}
