package fencesql_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// openSQLite returns a connection pool to a new SQLite database file. Its
// connections wait up to 10 s for a writer that holds the database
// (busy_timeout), and its transactions take the write lock when they begin
// (BEGIN IMMEDIATE), so concurrent writers take turns instead of failing.
func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fence.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("opening SQLite database %s: %v", path, err)
	}
	return db
}
