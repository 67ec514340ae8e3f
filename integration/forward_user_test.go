package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A command a follower forwards to the leader keeps the rights of the user
// who sent it: a script's undeclared keys are checked against that user's
// pattern, KEYS lists only its names, and a session it opens is its own
// (and not the forwarding node's user's), through a follower as through
// the leader.
func TestForwardedRequestsKeepTheUsersRights(t *testing.T) {
	dir := t.TempDir()
	usersFile := filepath.Join(dir, "users")
	if err := os.WriteFile(usersFile, []byte("billing billing-pass billing:*\nops ops-pass *\nnode node-pass *\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ds := newDaemons(t, 3)
	for i, d := range ds {
		d.args = append(d.args, "--users", usersFile, "--forward-user", "node", "--http-listen", "off")
		if i > 0 {
			d.args = append(d.args, "--join", ds[0].addr)
		}
		d.ready = func(d *daemon) error { return pingOnce(d.addr) }
		d.start(t)
	}
	cli := func(d *daemon, user, pass string, args ...string) string {
		t.Helper()
		return secCLI(t, d.port, append([]string{"--user", user, "--pass", pass, "--no-auth-warning"}, args...)...)
	}
	// The first node bootstrapped and leads; wait until both others have
	// joined and know it.
	for _, d := range ds[1:] {
		for deadline := time.Now().Add(30 * time.Second); !strings.HasSuffix(cli(d, "ops", "ops-pass", "FENCE.LEADER"), ds[0].addr); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never knew the leader", d.addr)
			}
		}
	}
	leader, follower := ds[0], ds[1]
	if got := cli(leader, "ops", "ops-pass", "SET", "other:x", "secret"); got != "OK" {
		t.Fatalf("SET other:x: %q", got)
	}
	cli(leader, "ops", "ops-pass", "SET", "billing:y", "v")
	const noPerm = "NOPERM The user executing the script can't access at least one of the keys mentioned in the command"
	for _, d := range []*daemon{leader, follower} {
		if got := cli(d, "billing", "billing-pass", "EVAL", "return redis.call('GET','other:x')", "0"); !strings.HasPrefix(got, noPerm) {
			t.Errorf("billing's script reading other:x via %s: %q, want NOPERM", d.addr, got)
		}
		if got := cli(d, "billing", "billing-pass", "EVAL", "return redis.call('SET','other:x','pwned')", "0"); !strings.HasPrefix(got, noPerm) {
			t.Errorf("billing's script writing other:x via %s: %q, want NOPERM", d.addr, got)
		}
		if got := cli(d, "billing", "billing-pass", "KEYS", "*"); got != "billing:y" {
			t.Errorf("billing's KEYS * via %s: %q, want billing:y", d.addr, got)
		}
		id := cli(d, "billing", "billing-pass", "FENCE.SESSION", "OPEN", "60000")
		for _, use := range []*daemon{leader, follower} {
			if got := cli(use, "billing", "billing-pass", "FENCE.SESSION", "KEEPALIVE", id); got != "1" {
				t.Errorf("billing's keepalive, via %s, of session %s it opened via %s: %q", use.addr, id, d.addr, got)
			}
		}
		if got := cli(follower, "ops", "ops-pass", "FENCE.SESSIONS", "USER", "billing"); !strings.Contains(got, "user\nbilling\nid\n"+id+"\n") {
			t.Errorf("session %s opened by billing via %s is not billing's:\n%s", id, d.addr, got)
		}
	}
	if got := cli(leader, "ops", "ops-pass", "GET", "other:x"); got != "secret" {
		t.Fatalf("other:x is %q after billing's refused scripts", got)
	}
	// A client cannot claim another user's rights by sending the command a
	// forwarding node wraps requests in.
	for _, d := range []*daemon{leader, follower} {
		if got := cli(d, "billing", "billing-pass", "FENCE.ONBEHALF", "ops", "*", "GET", "other:x"); !strings.HasPrefix(got, "NOPERM") && !strings.HasPrefix(got, "ERR") {
			t.Errorf("billing's FENCE.ONBEHALF via %s: %q", d.addr, got)
		}
		if got := cli(d, "ops", "ops-pass", "FENCE.ONBEHALF", "billing", "billing:*", "GET", "other:x"); !strings.HasPrefix(got, "ERR") && !strings.HasPrefix(got, "NOPERM") {
			t.Errorf("a client's FENCE.ONBEHALF on a connection that is not a node's via %s: %q", d.addr, got)
		}
	}
}
