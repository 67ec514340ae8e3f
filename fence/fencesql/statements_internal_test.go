package fencesql

import "testing"

// TestMySQLStatements pins the MySQL statements that docs/fencing.md shows.
func TestMySQLStatements(t *testing.T) {
	cols := []string{"body", "author"}
	w := newFencedWrite(MySQL, "app.docs", "id", "token", cols[:1]) // room for an append to overwrite "author"
	want := "INSERT INTO `app`.`docs` (`id`, `token`, `body`) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE " +
		"`body` = IF(`token` <= VALUES(`token`), VALUES(`body`), `body`), " +
		"`token` = IF(`token` <= VALUES(`token`), VALUES(`token`), `token`)"
	if w.up != want {
		t.Errorf("upsert:\n%s\nwant\n%s", w.up, want)
	}
	if want := "SELECT `token` FROM `app`.`docs` WHERE `id` = ? FOR UPDATE"; w.sel != want {
		t.Errorf("read back: %s, want %s", w.sel, want)
	}
	if cols[1] != "author" {
		t.Errorf("building the upsert changed the caller's columns: %v", cols)
	}
	tokens, err := NewTokens(MySQL, "fence`tokens")
	if err != nil {
		t.Fatal(err)
	}
	if want := "CREATE TABLE IF NOT EXISTS `fence``tokens` (`resource` VARBINARY(512) NOT NULL PRIMARY KEY, `token` BIGINT NOT NULL) ENGINE=InnoDB"; tokens.ddl != want {
		t.Errorf("tokens table: %s, want %s", tokens.ddl, want)
	}
}
