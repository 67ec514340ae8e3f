package fencesql_test

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := removePostgresTemplate(); err != nil {
		fmt.Fprintln(os.Stderr, "fencesql tests: removing the PostgreSQL template cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	if err := stopMySQL(); err != nil {
		fmt.Fprintln(os.Stderr, "fencesql tests: stopping MariaDB:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
