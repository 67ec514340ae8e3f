package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencerlock/fencer/client"
	"github.com/redis/go-redis/v9"
)

// The supervisor renews a leadership as it renews a lease.
var _ renewable = (*leadership)(nil)

// electRedis returns a plain RESP client of the test node.
func electRedis(t *testing.T) *redis.Client {
	t.Helper()
	r := redis.NewClient(&redis.Options{Addr: nodeAddr, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { r.Close() })
	return r
}

// electHolder returns FENCE.HOLDER name: nil if there is no leader.
func electHolder(t *testing.T, r *redis.Client, name string) []any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := r.Do(ctx, "FENCE.HOLDER", name).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		t.Fatalf("FENCE.HOLDER %s: %v", name, err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 5 {
		t.Fatalf("FENCE.HOLDER %s: %v", name, v)
	}
	return a
}

// electAwaitLeader waits until name has a leader and returns FENCE.HOLDER's
// reply.
func electAwaitLeader(t *testing.T, r *redis.Client, name string) []any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if h := electHolder(t, r, name); h != nil {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no leader after 10s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestElectRunsTheCommandWithTheEpoch(t *testing.T) {
	r := electRedis(t)
	var epochs []uint64
	for i := range 2 {
		res := fencer(t, "elect", "--value", "me-"+strconv.Itoa(i), "cli-elect", "--",
			"sh", "-c", `echo $FENCER_EPOCH; echo "$FENCER_ELECTION" >&2`)
		if res.code != 0 || res.stderr != "cli-elect\n" {
			t.Fatalf("elect %d: exit %d, stderr %q; want 0 and the command's only", i, res.code, res.stderr)
		}
		if !regexp.MustCompile(`^[1-9][0-9]*\n$`).MatchString(res.stdout) {
			t.Fatalf("stdout %q is not just the epoch", res.stdout)
		}
		e, _ := strconv.ParseUint(strings.TrimSpace(res.stdout), 10, 64)
		epochs = append(epochs, e)
		// Resigned when the command ended: no leader.
		if h := electHolder(t, r, "cli-elect"); h != nil {
			t.Fatalf("after the command the election has the leader %v, want none", h)
		}
	}
	if epochs[1] <= epochs[0] {
		t.Fatalf("epochs %v: the next leader's is not larger", epochs)
	}
}

// The leader's value is announced while the command runs: --value, or
// HOST/PID by default.
func TestElectAnnouncesTheValue(t *testing.T) {
	r := electRedis(t)
	for _, c := range []struct {
		args []string
		want *regexp.Regexp
	}{
		{[]string{"--value", "host-a:5432"}, regexp.MustCompile(`^host-a:5432$`)},
		{nil, regexp.MustCompile(`^.+/[0-9]+$`)},
	} {
		// The test reads FENCE.HOLDER while the command runs.
		done := make(chan result, 1)
		go func() {
			args := append(append([]string{"elect"}, c.args...), "cli-value", "--", "sleep", "1")
			done <- fencer(t, args...)
		}()
		h := electAwaitLeader(t, r, "cli-value")
		if res := <-done; res.code != 0 {
			t.Fatalf("elect: exit %d, stderr %q", res.code, res.stderr)
		}
		if v, _ := h[4].(string); !c.want.MatchString(v) {
			t.Errorf("elect %v: the leader's value is %q, want %v", c.args, v, c.want)
		}
	}
}

func TestElectExitStatus(t *testing.T) {
	if r := fencer(t, "elect", "cli-elect-exit", "sh", "-c", "exit 3"); r.code != 3 || r.stderr != "" {
		t.Errorf("command exiting 3: fencer exit %d, stderr %q", r.code, r.stderr)
	}
	if r := fencer(t, "elect", "cli-elect-exit", "--", "sh", "-c", "kill -TERM $$"); r.code != 128+15 {
		t.Errorf("command killed by SIGTERM: fencer exit %d", r.code)
	}
	if r := fencer(t, "elect", "cli-elect-exit", "--", "no-such-command-here"); r.code != 127 {
		t.Errorf("missing command: exit %d", r.code)
	}
	if r := fencer(t, "elect", "cli-elect-exit", "--", "/dev/null"); r.code != 126 {
		t.Errorf("a command that cannot run: exit %d", r.code)
	}
	// Another campaigner leads: --wait runs out.
	c, err := client.New([]string{nodeAddr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := c.NewElection(s, "cli-elect-exit").Campaign(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if r := fencer(t, "elect", "--wait", "300ms", "cli-elect-exit", "true"); r.code != 125 || !strings.Contains(r.stderr, "deadline exceeded") {
		t.Errorf("election led elsewhere with --wait 300ms: exit %d, stderr %q", r.code, r.stderr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("--wait 300ms took %v", took)
	}
	// The given-up campaign changed nothing.
	if l, err := c.NewElection(s, "cli-elect-exit").Leader(ctx); err != nil || l.Value != "other" {
		t.Fatalf("leader after the given-up campaign: %+v, %v", l, err)
	}
}

// Leadership lost while the command runs stops the command: the session
// revoked by an operator (the next keepalive learns it), or the election's
// lock alone revoked (the session stays open: fencer elect's own check of
// the leader learns it).
func TestElectStopsTheCommandWhenLeadershipIsLost(t *testing.T) {
	r := electRedis(t)
	for _, c := range []struct {
		name   string
		revoke func(h []any) []any
	}{
		{"session", func(h []any) []any { return []any{"FENCE.SESSION", "REVOKE", h[3]} }},
		{"lock", func([]any) []any { return []any{"FENCE.REVOKE", "cli-elect-lost-lock"} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "cli-elect-lost-" + c.name
			done := make(chan result, 1)
			go func() {
				done <- fencer(t, "elect", "--ttl", "1500ms", name, "--", "sh", "-c", "sleep 30 & wait")
			}()
			h := electAwaitLeader(t, r, name)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if n, err := r.Do(ctx, c.revoke(h)...).Int(); err != nil || n != 1 {
				t.Fatalf("%v: %d, %v", c.revoke(h), n, err)
			}
			revoked := time.Now()
			select {
			case res := <-done:
				if res.code != 128+15 || !strings.Contains(res.stderr, `lost the leadership of "`+name+`"`) || res.stdout != "" {
					t.Fatalf("exit %d, stdout %q, stderr %q; want 143 and a lost-leadership message", res.code, res.stdout, res.stderr)
				}
				if took := time.Since(revoked); took > 3*time.Second {
					t.Fatalf("command stopped %v after the revoke; keepalives and checks run every 500ms", took)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the command still runs 10s after the revoke")
			}
		})
	}
}

func TestElectUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"elect"},
		{"elect", "x"},
		{"elect", "x", "--"},
		{"elect", "--ttl", "3s", "--grace", "2s", "x", "true"},
		{"elect", "--no-such-flag", "x", "true"},
	} {
		if r := fencer(t, args...); r.code != 2 || !strings.Contains(r.stderr, "fencer --help") {
			t.Errorf("fencer %s: exit %d, stderr %q; want 2 and a hint", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}
