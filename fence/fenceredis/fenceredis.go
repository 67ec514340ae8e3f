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

// Errors returned by Store, besides *fence.StaleTokenError for a refused
// write and the client's own errors.
var (
	// ErrOddArguments means HSet was given no fields, or a field without a
	// value.
	ErrOddArguments = errors.New("fenceredis: HSet needs field and value pairs")
	// ErrReply means the script answered something this package did not
	// send it to answer: another script under its SHA1, or a corrupted
	// token key.
	ErrReply = errors.New("fenceredis: unexpected reply")
)

// script runs one fenced write. KEYS[1] is the data key and KEYS[2] its
// token key; ARGV[1] is the token in canonical decimal, ARGV[2] the
// operation and the rest its arguments. Tokens are compared as decimal
// strings (length first), because Lua's numbers are doubles and would round
// tokens above 2^53. The write comes before the token is recorded: if the
// write fails (a key of the wrong type), Redis has changed nothing.
//
// Reply: {1, token} if admitted, {0, highest} if refused.
var script = redis.NewScript(`
local function below(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local highest = redis.call('GET', KEYS[2])
if highest and below(ARGV[1], highest) then
  return {0, highest}
end
local op = ARGV[2]
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
redis.call('SET', KEYS[2], ARGV[1])
return {1, ARGV[1]}
`)

// Client is the part of a go-redis client that Store uses; *redis.Client,
// *redis.ClusterClient and *redis.Ring have it.
type Client interface {
	redis.Scripter
	Get(ctx context.Context, key string) *redis.StringCmd
}

// Store runs fenced writes on a Redis server. It is safe for concurrent use.
type Store struct {
	c        Client
	tokenKey func(key string) string
}

// Option configures a Store.
type Option func(*Store)

// WithTokenKey sets the name of the key that holds key's highest admitted
// token. The default is "fence:{" + key + "}".
func WithTokenKey(f func(key string) string) Option {
	return func(s *Store) { s.tokenKey = f }
}

// New returns a Store that writes through c.
func New(c Client, opts ...Option) *Store {
	s := &Store{c: c, tokenKey: func(key string) string { return "fence:{" + key + "}" }}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Set sets key to value, with an expiry of ttl if ttl > 0 (whole
// milliseconds), if token is at least key's highest admitted token.
func (s *Store) Set(ctx context.Context, key string, token uint64, value any, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if ttl > 0 && ms == 0 {
		ms = 1
	}
	return s.run(ctx, key, token, "set", value, max(ms, 0))
}

// HSet sets fields of the hash at key, given as field, value, field,
// value…, if token is at least key's highest admitted token.
func (s *Store) HSet(ctx context.Context, key string, token uint64, fieldsAndValues ...any) error {
	if len(fieldsAndValues) == 0 || len(fieldsAndValues)%2 != 0 {
		return fmt.Errorf("%w: got %d arguments", ErrOddArguments, len(fieldsAndValues))
	}
	return s.run(ctx, key, token, "hset", fieldsAndValues...)
}

// Del deletes key if token is at least key's highest admitted token. The
// token is still recorded, so a stale writer cannot recreate the key.
func (s *Store) Del(ctx context.Context, key string, token uint64) error {
	return s.run(ctx, key, token, "del")
}

// Highest returns key's highest admitted token, and false if no fenced write
// to key was admitted.
func (s *Store) Highest(ctx context.Context, key string) (uint64, bool, error) {
	v, err := s.c.Get(ctx, s.tokenKey(key)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	t, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%w: token key %s holds %q", ErrReply, s.tokenKey(key), v)
	}
	return t, true, nil
}

func (s *Store) run(ctx context.Context, key string, token uint64, op string, args ...any) error {
	argv := append([]any{strconv.FormatUint(token, 10), op}, args...)
	reply, err := script.Run(ctx, s.c, []string{key, s.tokenKey(key)}, argv...).Slice()
	if err != nil {
		return err
	}
	if len(reply) != 2 {
		return fmt.Errorf("%w: %v", ErrReply, reply)
	}
	admitted, ok1 := reply[0].(int64)
	h, ok2 := reply[1].(string)
	highest, err := strconv.ParseUint(h, 10, 64)
	if !ok1 || !ok2 || err != nil {
		return fmt.Errorf("%w: %v", ErrReply, reply)
	}
	if admitted == 1 {
		return nil
	}
	return &fence.StaleTokenError{Resource: key, Token: token, Highest: highest}
}
