package rediscompat

import (
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeSamples gives each command flagged fWrite arguments that name the key
// k and the value v wherever the command takes a key or a value.
var writeSamples = map[string][]string{
	"del": {"k"}, "unlink": {"k"}, "expire": {"k", "10"}, "pexpire": {"k", "10000"},
	"expireat": {"k", "9999999999"}, "pexpireat": {"k", "9999999999999"}, "persist": {"k"},
	"hset": {"k", "v", "v"}, "hmset": {"k", "v", "v"}, "hsetnx": {"k", "v", "v"}, "hdel": {"k", "v"},
	"hincrby": {"k", "v", "1"}, "hincrbyfloat": {"k", "v", "1"},
	"lpush": {"k", "v"}, "rpush": {"k", "v"}, "lpushx": {"k", "v"}, "rpushx": {"k", "v"},
	"lpop": {"k"}, "rpop": {"k"}, "lset": {"k", "0", "v"}, "lrem": {"k", "0", "v"}, "ltrim": {"k", "0", "1"},
	"blpop": {"k", "0.01"}, "brpop": {"k", "0.01"}, "sadd": {"k", "v"}, "srem": {"k", "v"},
	"set": {"k", "v"}, "setnx": {"k", "v"}, "setex": {"k", "10", "v"}, "psetex": {"k", "10000", "v"},
	"getset": {"k", "v"}, "getdel": {"k"}, "getex": {"k", "PX", "10000"},
	"mset": {"k", "v"}, "msetnx": {"k", "v"}, "incr": {"k"}, "decr": {"k"}, "incrby": {"k", "1"},
	"decrby": {"k", "-1"}, "incrbyfloat": {"k", "1"}, "append": {"k", "v"},
	"zadd": {"k", "1", "v"}, "zincrby": {"k", "1", "v"}, "zrem": {"k", "v"},
	"zremrangebyscore": {"k", "0", "1"}, "zremrangebyrank": {"k", "0", "1"}, "zpopmin": {"k"}, "zpopmax": {"k"},
	"zinterstore": {"k", "1", "k"}, "zunionstore": {"k", "1", "k"},
}

// Every command flagged write in the command table, run directly and from a
// script, never makes a key a string holding the value whose release of it
// is the key's newest, under --redlock-multi-endpoint: every string write
// passes the refusal in db.setString. The value "1" stands for a counter's
// result.
func TestNoWriteRevivesAReleasedValue(t *testing.T) {
	e, _ := newEngine(t, Config{RedlockMultiEndpoint: true})
	s := &Session{}
	release := `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`
	var names []string
	for name, c := range commands {
		if c.flags&fWrite != 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, v := range []string{"v", "1"} {
		// v's release is the key's newest.
		do(t, e, s, "DEL", "k")
		require.Equal(t, replyOK, do(t, e, s, "SET", "k", v, "NX", "PX", "10000"))
		require.Equal(t, Int(1), do(t, e, s, "EVAL", release, "1", "k", v))
		checkWrites(t, e, s, names, v)
	}
}

func checkWrites(t *testing.T, e *Engine, s *Session, names []string, v string) {
	t.Helper()
	for _, name := range names {
		sample, ok := writeSamples[name]
		if !ok {
			t.Errorf("%s is flagged write and has no sample here: add one", name)
			continue
		}
		for _, script := range []bool{false, true} {
			args := [][]byte{[]byte(name)}
			for _, a := range sample {
				args = append(args, []byte(a))
			}
			if script {
				quoted := make([]string, len(args))
				for i, a := range args {
					quoted[i] = "'" + string(a) + "'"
				}
				args = [][]byte{[]byte("EVAL"), []byte("return redis.call(" + strings.Join(quoted, ", ") + ")"), []byte("1"), []byte("k"), []byte("v"), []byte("1")}
			}
			r, err := e.Do(ctxT(t), s, args)
			if err != nil {
				assert.True(t, errors.Is(err, ErrReleased), "%s (script %v): %v", name, script, err)
			}
			got := do(t, e, s, "GET", "k")
			if b, isStr := got.(Bulk); isStr {
				assert.NotEqual(t, v, string(b), "%s (script %v) answered %v", name, script, r)
			}
			do(t, e, s, "DEL", "k")
		}
	}
}
