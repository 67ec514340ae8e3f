// Package integration tests the built fencerd binary as a real process on
// loopback, the way a new user meets it: started with flags, talked to with
// the real redis-cli and with go-redis, killed with SIGKILL, stopped with
// SIGTERM and restarted on the same data directory.
//
// The tests build fencerd once (TestMain), give every daemon a fresh data
// directory and free ports, and stop every process they start. They need
// redis-cli on PATH (Debian and Ubuntu: apt-get install redis-tools); without
// it they fail rather than skip. Run them with:
//
//	go test -race -count=1 ./integration/ -v
package integration
