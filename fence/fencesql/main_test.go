package fencesql_test

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := stopPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "fencesql tests: stopping PostgreSQL:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
