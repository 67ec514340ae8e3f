package redisbridge

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Redisson cannot be installed here (no Maven registry); these tests send
// its scripts and commands as its source (RedissonLock, RedissonBaseLock,
// LockTask, LockPubSub) sends them with a single-server configuration:
// EVAL (or EVALSHA with the script cache), SUBSCRIBE on a connection of its
// own, and DEL of the unlock latch.

const (
	rLock    = "order-42"
	rChannel = "redisson_lock__channel:{order-42}"
	ownerA   = "6f0d3e1c-2b4a-4c39-9d1e-1a2b3c4d5e6f:1"
	ownerB   = "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d:57"
)

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

func message(channel, msg string) string {
	return "*3\r\n" + bulk("message") + bulk(channel) + bulk(msg)
}

func TestRedissonLockUnlockAndWakeUp(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	a, b, sub := dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)

	// A locks, and re-enters.
	assert.Equal(t, "$-1\r\n", a.do("EVAL", redissonLock319, "1", rLock, "30000", ownerA))
	assert.Equal(t, "$-1\r\n", a.do("EVALSHA", scriptSHA([]byte(redissonLock319)), "1", rLock, "30000", ownerA))
	assert.Equal(t, bulk("2"), a.do("HGET", rLock, ownerA), "hold count")
	assert.Equal(t, ":1\r\n", a.do("HEXISTS", rLock, ownerA))
	assert.Equal(t, ":0\r\n", a.do("HEXISTS", rLock, ownerB))

	// B is refused with the remaining time, subscribes, and tries again.
	ttl := b.do("EVAL", redissonLock319, "1", rLock, "30000", ownerB)
	require.True(t, strings.HasPrefix(ttl, ":"), ttl)
	ms, _ := strconv.Atoi(strings.TrimSpace(ttl[1:]))
	assert.InDelta(t, 30000, ms, 2000)
	assert.Equal(t, "*3\r\n"+bulk("subscribe")+bulk(rChannel)+":1\r\n", sub.do("SUBSCRIBE", rChannel))
	assert.Equal(t, "*2\r\n"+bulk("pong")+bulk(""), sub.do("PING"), "RESP2 PING while subscribed")
	assert.Equal(t, "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n", sub.do("GET", rLock))
	assert.True(t, strings.HasPrefix(b.do("EVAL", redissonLock319, "1", rLock, "30000", ownerB), ":"))

	// The watchdog renews A's lease, alone and in a batch.
	assert.Equal(t, ":1\r\n", a.do("EVAL", redissonRenew31, "1", rLock, "30000", ownerA))
	assert.Equal(t, ":0\r\n", a.do("EVAL", redissonRenew31, "1", rLock, "30000", ownerB))
	assert.Equal(t, "*2\r\n:1\r\n:0\r\n", a.do("EVAL", redissonRenewBatch344, "2", rLock, "other-lock", "30000", ownerA, ownerA))

	// A leaves once: still held, no message. B cannot unlock A's lock.
	latch1 := "redisson_unlock_latch:{order-42}:req-1"
	assert.Equal(t, ":0\r\n", a.do("EVAL", redissonUnlock324, "3", rLock, rChannel, latch1, "0", "30000", ownerA, "publish", "7500"))
	assert.Equal(t, ":1\r\n", a.do("DEL", latch1), "Redisson deletes the latch")
	assert.Equal(t, "$-1\r\n", b.do("EVAL", redissonUnlock324, "3", rLock, rChannel, "redisson_unlock_latch:{order-42}:req-b", "0", "30000", ownerB, "publish", "7500"))
	assert.Equal(t, bulk("1"), a.do("HGET", rLock, ownerA))

	// A leaves again: freed, and the waiting subscriber is told.
	latch2 := "redisson_unlock_latch:{order-42}:req-2"
	assert.Equal(t, ":1\r\n", a.do("EVAL", redissonUnlock324, "3", rLock, rChannel, latch2, "0", "30000", ownerA, "publish", "7500"))
	assert.Equal(t, message(rChannel, "0"), sub.read())
	assert.Equal(t, ":1\r\n", a.do("EVAL", redissonUnlock324, "3", rLock, rChannel, latch2, "0", "30000", ownerA, "publish", "7500"),
		"a retried unlock is answered from its latch")
	assert.Equal(t, ":1\r\n", a.do("DEL", latch2))
	assert.Equal(t, "$-1\r\n", a.do("EVAL", redissonUnlock324, "3", rLock, rChannel, latch2, "0", "30000", ownerA, "publish", "7500"))

	// B wakes up and takes it, with a fresh hold count and a token.
	assert.Equal(t, "$-1\r\n", b.do("EVAL", redissonLock319, "1", rLock, "30000", ownerB))
	assert.Equal(t, bulk("1"), b.do("HGET", rLock, ownerB))
	assert.True(t, strings.HasPrefix(b.do("FENCE.TOKEN", rLock, ownerB), ":"))
	assert.Equal(t, "*3\r\n"+bulk("unsubscribe")+bulk(rChannel)+":0\r\n", sub.do("UNSUBSCRIBE", rChannel))
	assert.Equal(t, ":1\r\n", sub.do("HEXISTS", rLock, ownerB), "a normal connection again")

	// forceUnlock frees it whoever holds it, and publishes.
	assert.Equal(t, "*3\r\n"+bulk("subscribe")+bulk(rChannel)+":1\r\n", sub.do("SUBSCRIBE", rChannel))
	assert.Equal(t, "$-1\r\n", b.do("EVAL", redissonLock319, "1", rLock, "30000", ownerB))
	assert.Equal(t, ":1\r\n", a.do("EVAL", redissonForceUnlock322, "2", rLock, rChannel, "0", "publish"))
	assert.Equal(t, message(rChannel, "0"), sub.read())
	assert.Equal(t, ":0\r\n", a.do("EXISTS", rLock))
	assert.Equal(t, ":0\r\n", a.do("EVAL", redissonForceUnlock31, "2", rLock, rChannel, "0"))
	assert.Equal(t, "$-1\r\n", a.do("EVAL", redissonLock31, "1", rLock, "30000", ownerA))
	assert.Equal(t, bulk("1"), a.do("HGET", rLock, ownerA), "holds of the force-unlocked owner are gone")
}

// Every Redisson version's scripts: lock, re-enter, unlock twice.
func TestRedissonScriptVersions(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	a, sub := dialRaw(t, addr), dialRaw(t, addr)
	assert.Equal(t, "*3\r\n"+bulk("subscribe")+bulk(rChannel)+":1\r\n", sub.do("SUBSCRIBE", rChannel))
	unlocks := []struct {
		text string
		args []string
	}{
		{redissonUnlock31, []string{"2", rLock, rChannel, "0", "30000", ownerA}},
		{redissonUnlock3106, []string{"2", rLock, rChannel, "0", "30000", ownerA}},
		{redissonUnlock322, []string{"2", rLock, rChannel, "0", "30000", ownerA, "publish"}},
		{redissonUnlock324, []string{"3", rLock, rChannel, "latch-x", "0", "30000", ownerA, "publish", "5000"}},
	}
	for _, lock := range []string{redissonLock31, redissonLock3123, redissonLock319} {
		for _, u := range unlocks {
			assert.Equal(t, "$-1\r\n", a.do("EVAL", lock, "1", rLock, "30000", ownerA))
			assert.Equal(t, "$-1\r\n", a.do("EVAL", lock, "1", rLock, "30000", ownerA))
			assert.Equal(t, ":0\r\n", a.do(append([]string{"EVAL", u.text}, u.args...)...))
			a.do("DEL", "latch-x") // as Redisson does once it has its answer
			assert.Equal(t, ":1\r\n", a.do(append([]string{"EVAL", u.text}, u.args...)...))
			assert.Equal(t, message(rChannel, "0"), sub.read())
			a.do("DEL", "latch-x")
		}
	}
	// Before 3.10.6, unlocking a free lock reported success and published.
	assert.Equal(t, ":1\r\n", a.do(append([]string{"EVAL", redissonUnlock31}, unlocks[0].args...)...))
	assert.Equal(t, message(rChannel, "0"), sub.read())
}

func TestRESP3SubscriberGetsPushes(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	sub, pub := dialRaw(t, addr), dialRaw(t, addr)
	require.True(t, strings.HasPrefix(sub.do("HELLO", "3"), "%7"))
	assert.Equal(t, ">3\r\n"+bulk("ssubscribe")+bulk("ch")+":1\r\n", sub.do("SSUBSCRIBE", "ch"))
	assert.Equal(t, "_\r\n", sub.do("GET", "k"), "RESP3 allows any command while subscribed")
	assert.Equal(t, ":1\r\n", pub.do("SPUBLISH", "ch", "hello"))
	assert.Equal(t, ":0\r\n", pub.do("PUBLISH", "ch", "plain"), "PUBLISH does not reach shard subscribers")
	assert.Equal(t, ">3\r\n"+bulk("smessage")+bulk("ch")+bulk("hello"), sub.read())
	assert.Equal(t, ">3\r\n"+bulk("sunsubscribe")+bulk("ch")+":0\r\n", sub.do("SUNSUBSCRIBE"))
	assert.Equal(t, "+PONG\r\n", sub.do("PING"))
	assert.Equal(t, "+OK\r\n", sub.do("QUIT"))
}

// Spring Integration's RedisLockRegistry (pub-sub mode) PSUBSCRIBEs to
// <registryKey>-channel:*; a RESP3 subscriber gets its pmessage as a
// four-element push, and a shard publish reaches no pattern.
func TestRESP3PatternSubscriberGetsPushes(t *testing.T) {
	addr, _ := startBridge(t, nil, nil)
	sub, pub := dialRaw(t, addr), dialRaw(t, addr)
	require.True(t, strings.HasPrefix(sub.do("HELLO", "3"), "%7"))
	assert.Equal(t, ">3\r\n"+bulk("psubscribe")+bulk("reg-channel:*")+":1\r\n", sub.do("PSUBSCRIBE", "reg-channel:*"))
	assert.Equal(t, ":1\r\n", pub.do("PUBLISH", "reg-channel:job", "unlocked"))
	assert.Equal(t, ":0\r\n", pub.do("SPUBLISH", "reg-channel:job", "shard"), "SPUBLISH does not reach patterns")
	assert.Equal(t, ":0\r\n", pub.do("PUBLISH", "other:job", "x"))
	assert.Equal(t, ">4\r\n"+bulk("pmessage")+bulk("reg-channel:*")+bulk("reg-channel:job")+bulk("unlocked"), sub.read())
	assert.Equal(t, ">3\r\n"+bulk("punsubscribe")+bulk("reg-channel:*")+":0\r\n", sub.do("PUNSUBSCRIBE"))
	assert.Equal(t, ":0\r\n", pub.do("PUBLISH", "reg-channel:job", "gone"))
	assert.Equal(t, "+PONG\r\n", sub.do("PING"))
}
