package integration

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
)

// TestRedlockLeaderKill kills the leader with SIGKILL while a redsync client
// holds the lock and three others contend for it, and three node-redlock v5
// processes contend for another lock. The holder's lock, acknowledged
// before the kill, is still its own, with the same token, on every
// surviving node once a new leader is elected; nobody else got into either
// lock meanwhile; and every worker still finishes its rounds.
func TestRedlockLeaderKill(t *testing.T) {
	tools := rlInstall(t)
	for _, topo := range []rlTopology{rlOneAddress, rlEveryAddress} {
		t.Run(topo.String(), func(t *testing.T) {
			env := rlStart(t, topo)
			key := "failover-" + topo.String()
			// The node workers span the kill: they start within 2 s and
			// hold the lock 150 ms a round, 24 rounds in all.
			nodeDone := make(chan struct{})
			go func() {
				defer close(nodeDone)
				t.Run("node-redlock-v5", func(t *testing.T) {
					tools.runNodeRedlock(t, env, "5", "failover-node-"+topo.String(), 3, 8, 150*time.Millisecond, 30*time.Second)
				})
			}()
			defer func() { <-nodeDone }()
			time.Sleep(2500 * time.Millisecond)
			killed := false
			rlRedsyncContention(t, env, key, 4, 3, func(value string, token int64) error {
				leader, err := env.awaitLeader(nil)
				if err != nil {
					return err
				}
				d := env.nodes[leader]
				if err := d.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
					return fmt.Errorf("SIGKILL: %w", err)
				}
				select {
				case <-d.proc.exited:
				case <-time.After(stopTimeout):
					return fmt.Errorf("the leader did not exit within %v of SIGKILL", stopTimeout)
				}
				killed = true
				dead := map[int]bool{leader: true}
				if _, err := env.awaitLeader(dead); err != nil {
					return err
				}
				for i, n := range env.nodes {
					if dead[i] {
						continue
					}
					if err := rlAwaitToken(n.addr, key, value, token); err != nil {
						return fmt.Errorf("node %d after the leader's death: %w", i+1, err)
					}
				}
				return nil
			})
			if !killed {
				t.Fatal("the leader was never killed")
			}
		})
	}
}

// rlAwaitToken waits until FENCE.TOKEN key value through addr answers
// token; any other answer than an error of a leader change fails.
func rlAwaitToken(addr, key, value string, token int64) error {
	deadline := time.Now().Add(rlReady)
	for {
		v, err := rlDo(addr, 2*requestTimeout, "FENCE.TOKEN", key, value)
		switch {
		case err == nil && v == token:
			return nil
		case err == nil:
			return fmt.Errorf("FENCE.TOKEN %s %s = %v, want %d: the acknowledged lock was lost", key, value, v, token)
		case time.Now().After(deadline):
			return fmt.Errorf("FENCE.TOKEN %s %s: still %v after %v", key, value, err, rlReady)
		}
		time.Sleep(rlPoll)
	}
}

// TestRedlockRedissonWakeUpAcrossNodes sends Redisson's lock, unlock and
// SUBSCRIBE as its source does, with the waiting client subscribed on one
// node and the holder unlocking through another: the unlock message is
// relayed to every node, so the waiter wakes up. (Redisson itself cannot
// be installed here; see docs/redlock.md.) Then a RESP3 client of a
// follower gets its forwarded replies in RESP3.
func TestRedlockRedissonWakeUpAcrossNodes(t *testing.T) {
	env := rlStart(t, rlOneAddress)
	leader := env.leader(t, nil)
	holderAddr := env.nodes[(leader+1)%3].addr
	waiterAddr := env.nodes[(leader+2)%3].addr
	const (
		lock     = "invoice:7"
		channel  = "redisson_lock__channel:{invoice:7}"
		holder   = "3f1e2d4c-5b6a-4798-8a9b-0c1d2e3f4a5b:1"
		waiter   = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f0a1b2c3d:33"
		lockText = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);"
		unlock   = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; "
	)
	if v, err := rlDo(holderAddr, requestTimeout, "EVAL", lockText, 1, lock, 30000, holder); err == nil || err.Error() != "redis: nil" {
		t.Fatalf("holder's lock: %v %v, want nil (granted)", v, err)
	}
	v, err := rlDo(waiterAddr, requestTimeout, "EVAL", lockText, 1, lock, 30000, waiter)
	if ttl, ok := v.(int64); err != nil || !ok || ttl <= 0 {
		t.Fatalf("waiter's lock: %v %v, want the holder's remaining time", v, err)
	}

	// The waiter subscribes on its own connection, in RESP2, as Redisson.
	sub, err := net.Dial("tcp", waiterAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	rd := bufio.NewReader(sub)
	if _, err := sub.Write(resp.Command("SUBSCRIBE", channel)); err != nil {
		t.Fatal(err)
	}
	_ = sub.SetReadDeadline(time.Now().Add(requestTimeout))
	if got := rlReadRaw(t, rd); got != "*3\r\n$9\r\nsubscribe\r\n$"+fmt.Sprint(len(channel))+"\r\n"+channel+"\r\n:1\r\n" {
		t.Fatalf("SUBSCRIBE answered %q", got)
	}

	latch := "redisson_unlock_latch:{invoice:7}:8d7c6b5a"
	if v, err := rlDo(holderAddr, requestTimeout, "EVAL", unlock, 3, lock, channel, latch, 0, 30000, holder, "publish", 7500); err != nil || v != int64(1) {
		t.Fatalf("holder's unlock: %v %v, want 1", v, err)
	}
	_ = sub.SetReadDeadline(time.Now().Add(requestTimeout))
	if got := rlReadRaw(t, rd); got != "*3\r\n$7\r\nmessage\r\n$"+fmt.Sprint(len(channel))+"\r\n"+channel+"\r\n$1\r\n0\r\n" {
		t.Fatalf("the waiter got %q, want the unlock message", got)
	}
	if v, err := rlDo(holderAddr, requestTimeout, "DEL", latch); err != nil || v != int64(1) {
		t.Fatalf("DEL of the unlock latch: %v %v, want 1", v, err)
	}
	if v, err := rlDo(waiterAddr, requestTimeout, "EVAL", lockText, 1, lock, 30000, waiter); err == nil || err.Error() != "redis: nil" {
		t.Fatalf("waiter's retry: %v %v, want nil (granted)", v, err)
	}
	if v, err := rlDo(holderAddr, requestTimeout, "HEXISTS", lock, waiter); err != nil || v != int64(1) {
		t.Fatalf("HEXISTS %s %s = %v %v, want 1: the waiter holds the lock", lock, waiter, v, err)
	}

	// A RESP3 client on a follower gets RESP3 replies to what the follower
	// forwards to the leader.
	c3, err := net.Dial("tcp", holderAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	rd3 := bufio.NewReader(c3)
	_ = c3.SetDeadline(time.Now().Add(2 * requestTimeout))
	if _, err := c3.Write(resp.Command("HELLO", "3")); err != nil {
		t.Fatal(err)
	}
	if got := rlReadRaw(t, rd3); !strings.HasPrefix(got, "%7\r\n") {
		t.Fatalf("HELLO 3 answered %q", got)
	}
	// One write, so both arrive together.
	if _, err := c3.Write(append(resp.Command("GET", "free"), resp.Command("FENCE.STATUS", "free")...)); err != nil {
		t.Fatal(err)
	}
	if got := rlReadRaw(t, rd3) + rlReadRaw(t, rd3); got != "_\r\n_\r\n" {
		t.Fatalf("forwarded GET and FENCE.STATUS of a free key in RESP3: %q, want two RESP3 nulls", got)
	}
}

// rlReadRaw reads one reply, or one message of a subscription, and returns
// its bytes as sent.
func rlReadRaw(t *testing.T, rd *bufio.Reader) string {
	t.Helper()
	raw, err := resp.ReadRaw(rd)
	if err != nil {
		t.Fatalf("reading a reply: %v (read %q)", err, raw)
	}
	return string(raw)
}
