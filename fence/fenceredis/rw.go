package fenceredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fencerlock/fencer/fence"
	"github.com/redis/go-redis/v9"
)

// rwScript runs one operation under the read-write rule (see
// fence.RWValidator). KEYS[1] is the data key and KEYS[2] its token key, a
// hash with fields w (W, the highest admitted write token; absent means 0)
// and h (H, the highest admitted token). ARGV[1] is the token in canonical
// decimal, ARGV[2] the operation and the rest its arguments; tokens are
// compared as decimal strings, as in script.
//
// A read (get, hgetall) is admitted if token >= W, and raises H; a write
// (set, hset, del) is admitted if token >= H, and sets W and H. The
// operation comes before the tokens are recorded, so an operation that
// Redis refuses (a key of the wrong type) changes nothing. A token key that
// is not a hash (Store's, or anything else) fails the script with
// WRONGTYPE before anything is written.
//
// Reply: {1, token, value} for an admitted read, {1, token} for an
// admitted write, {0, W or H} if refused.
var rwScript = redis.NewScript(`
local function below(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local t, op = ARGV[1], ARGV[2]
local w = redis.call('HGET', KEYS[2], 'w') or '0'
local h = redis.call('HGET', KEYS[2], 'h')
if op == 'get' or op == 'hgetall' then
  if below(t, w) then
    return {0, w}
  end
  local v
  if op == 'get' then
    v = redis.call('GET', KEYS[1])
  else
    v = redis.call('HGETALL', KEYS[1])
  end
  if not h or below(h, t) then
    redis.call('HSET', KEYS[2], 'h', t)
  end
  return {1, t, v}
end
if h and below(t, h) then
  return {0, h}
end
if op == 'set' then
  if ARGV[4] == '0' then
    redis.call('SET', KEYS[1], ARGV[3])
  else
    redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
  end
elseif op == 'hset' then
  redis.call('HSET', KEYS[1], unpack(ARGV, 3))
elseif op == 'del' then
  redis.call('DEL', KEYS[1])
else
  return redis.error_reply('ERR fenceredis: unknown operation ' .. op)
end
redis.call('HSET', KEYS[2], 'w', t, 'h', t)
return {1, t}
`)

// tokensScript reads a token key's W and H.
var tokensScript = redis.NewScript(`return redis.call('HMGET', KEYS[1], 'w', 'h')`)

// RWStore runs reads and writes on a Redis server under the read-write
// fencing rule, for data guarded by a read-write lock: a read is admitted if
// its token is at least the highest token of an admitted write (W), so that
// readers holding together are all admitted; a write if its token is at
// least every token admitted (H), readers' included. See fence.RWValidator
// for why. Each operation is one Lua script. It is safe for concurrent use.
//
// The tokens of key live in the same companion key as Store's ("fence:{" +
// key + "}", or WithTokenKey's), as a hash with fields w and h. A key
// fenced with both Store and RWStore fails with WRONGTYPE instead of mixing
// the two rules. Reads must go through RWStore to be fenced: a read with the
// client directly neither is checked nor raises H.
type RWStore struct {
	c        Client
	tokenKey func(key string) string
}

// NewRW returns an RWStore that reads and writes through c. The options are
// Store's.
func NewRW(c Client, opts ...Option) *RWStore {
	s := New(c, opts...)
	return &RWStore{c: s.c, tokenKey: s.tokenKey}
}

// Get returns the value of key if token is at least key's W, and raises
// key's H to token. A key that does not exist answers redis.Nil, as the
// client's Get does (the read is admitted all the same).
func (s *RWStore) Get(ctx context.Context, key string, token uint64) (string, error) {
	v, err := s.run(ctx, key, token, "get")
	if err != nil {
		return "", err
	}
	if v == nil {
		return "", redis.Nil
	}
	str, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: GET answered %v", ErrReply, v)
	}
	return str, nil
}

// HGetAll returns the fields and values of the hash at key (empty if it
// does not exist) if token is at least key's W, and raises key's H to token.
func (s *RWStore) HGetAll(ctx context.Context, key string, token uint64) (map[string]string, error) {
	v, err := s.run(ctx, key, token, "hgetall")
	if err != nil {
		return nil, err
	}
	flat, ok := v.([]any)
	if !ok || len(flat)%2 != 0 {
		return nil, fmt.Errorf("%w: HGETALL answered %v", ErrReply, v)
	}
	m := make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		f, ok1 := flat[i].(string)
		val, ok2 := flat[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: HGETALL answered %v", ErrReply, v)
		}
		m[f] = val
	}
	return m, nil
}

// Set sets key to value, with an expiry of ttl if ttl > 0 (whole
// milliseconds), if token is at least key's H, and sets key's W and H to
// token.
func (s *RWStore) Set(ctx context.Context, key string, token uint64, value any, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if ttl > 0 && ms == 0 {
		ms = 1
	}
	_, err := s.run(ctx, key, token, "set", value, max(ms, 0))
	return err
}

// HSet sets fields of the hash at key, given as field, value, field,
// value…, if token is at least key's H, and sets key's W and H to token.
func (s *RWStore) HSet(ctx context.Context, key string, token uint64, fieldsAndValues ...any) error {
	if len(fieldsAndValues) == 0 || len(fieldsAndValues)%2 != 0 {
		return fmt.Errorf("%w: got %d arguments", ErrOddArguments, len(fieldsAndValues))
	}
	_, err := s.run(ctx, key, token, "hset", fieldsAndValues...)
	return err
}

// Del deletes key if token is at least key's H, and sets key's W and H to
// token. The tokens stay, so a stale writer cannot recreate the key.
func (s *RWStore) Del(ctx context.Context, key string, token uint64) error {
	_, err := s.run(ctx, key, token, "del")
	return err
}

// Tokens returns key's W (the highest token of an admitted write, 0 if
// none) and H (the highest admitted token), and false if no fenced
// operation on key was admitted.
func (s *RWStore) Tokens(ctx context.Context, key string) (writer, highest uint64, ok bool, err error) {
	reply, err := tokensScript.Run(ctx, s.c, []string{s.tokenKey(key)}).Slice()
	if err != nil {
		return 0, 0, false, err
	}
	if len(reply) != 2 {
		return 0, 0, false, fmt.Errorf("%w: %v", ErrReply, reply)
	}
	if reply[1] == nil {
		return 0, 0, false, nil
	}
	if reply[0] != nil {
		if writer, err = s.parseToken(key, reply[0]); err != nil {
			return 0, 0, false, err
		}
	}
	if highest, err = s.parseToken(key, reply[1]); err != nil {
		return 0, 0, false, err
	}
	return writer, highest, true, nil
}

func (s *RWStore) parseToken(key string, v any) (uint64, error) {
	str, ok := v.(string)
	t, err := strconv.ParseUint(str, 10, 64)
	if !ok || err != nil {
		return 0, fmt.Errorf("%w: token key %s holds %v", ErrReply, s.tokenKey(key), v)
	}
	return t, nil
}

// run runs one operation and returns what a read read (nil for a write).
func (s *RWStore) run(ctx context.Context, key string, token uint64, op string, args ...any) (any, error) {
	argv := append([]any{strconv.FormatUint(token, 10), op}, args...)
	reply, err := rwScript.Run(ctx, s.c, []string{key, s.tokenKey(key)}, argv...).Slice()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("%w: nil", ErrReply)
		}
		return nil, err
	}
	if len(reply) < 2 {
		return nil, fmt.Errorf("%w: %v", ErrReply, reply)
	}
	admitted, ok1 := reply[0].(int64)
	h, ok2 := reply[1].(string)
	tok, err := strconv.ParseUint(h, 10, 64)
	if !ok1 || !ok2 || err != nil {
		return nil, fmt.Errorf("%w: %v", ErrReply, reply)
	}
	if admitted != 1 {
		return nil, &fence.StaleTokenError{Resource: key, Token: token, Highest: tok}
	}
	if len(reply) == 3 {
		return reply[2], nil
	}
	return nil, nil
}
