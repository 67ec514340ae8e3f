"""Fenced writes to Redis (Go: fence/fenceredis, with the same keys and script).

Each data key's highest admitted token is kept in its own key,
``fence:{<key>}`` by default (the same hash slot as the key in a Redis
Cluster), and a Lua script compares, writes and records in one step. The
script and the key layout are fenceredis's, so Go and Python writers of the
same keys fence each other.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

from .fence import StaleTokenError

__all__ = ["Store", "ReplyError", "default_token_key"]

# KEYS[1] is the data key and KEYS[2] its token key; ARGV[1] is the token in
# canonical decimal, ARGV[2] the operation and the rest its arguments.
# Tokens are compared as decimal strings (length first), because Lua's
# numbers are doubles and would round tokens above 2^53. The write comes
# before the token is recorded: if the write fails (a key of the wrong
# type), Redis has changed nothing. Reply: {1, token} if admitted,
# {0, highest} if refused. The text is fenceredis's, byte for byte.
SCRIPT = """
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
"""


class ReplyError(Exception):
    """The script or a token key answered something this module did not expect."""


def default_token_key(key: str) -> str:
    """The key that holds key's highest admitted token: fence:{key}."""
    return "fence:{" + key + "}"


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _token(token: int) -> str:
    if isinstance(token, bool) or not isinstance(token, int) or token < 0:
        raise ValueError(f"token {token!r} is not a non-negative int")
    return str(token)


class Store:
    """Runs fenced writes through a redis-py client (redis.Redis, or a
    RedisCluster: the token key shares the data key's hash slot).

    Every write takes the token of the writer's lease and is admitted if it
    is at least the key's highest admitted token, else it raises
    StaleTokenError and changes nothing. Safe to share between threads.
    """

    def __init__(self, redis_client, token_key: Callable[[str], str] = default_token_key):
        self.redis = redis_client
        self.token_key = token_key
        self._script = redis_client.register_script(SCRIPT)

    def set(self, key: str, token: int, value, ttl: Optional[float] = None) -> None:
        """Set key to value (expiring after ttl seconds, whole milliseconds, if given)."""
        ms = 0
        if ttl is not None and ttl > 0:
            ms = max(int(ttl * 1000), 1)
        self._run(key, token, "set", value, ms)

    def hset(self, key: str, token: int, mapping: Optional[dict] = None, *fields_and_values) -> None:
        """Set fields of the hash at key: a mapping, or field, value, field, value ..."""
        args = list(fields_and_values)
        if mapping:
            for f, v in mapping.items():
                args += [f, v]
        if not args or len(args) % 2:
            raise ValueError(f"hset needs field and value pairs, got {len(args)} arguments")
        self._run(key, token, "hset", *args)

    def delete(self, key: str, token: int) -> None:
        """Delete key. The token is still recorded, so a stale writer cannot recreate it."""
        self._run(key, token, "del")

    def highest(self, key: str) -> Optional[int]:
        """Return key's highest admitted token, or None if no fenced write to key was admitted."""
        v = self.redis.get(self.token_key(key))
        if v is None:
            return None
        t = _text(v)
        if not t.isdigit():
            raise ReplyError(f"token key {self.token_key(key)} holds {t!r}")
        return int(t)

    def _run(self, key: str, token: int, op: str, *args) -> None:
        tok = _token(token)
        reply = self._script(keys=[key, self.token_key(key)], args=[tok, op, *args])
        if not isinstance(reply, list) or len(reply) != 2:
            raise ReplyError(f"unexpected reply {reply!r}")
        admitted, h = reply
        h = _text(h)
        if not isinstance(admitted, int) or not h.isdigit():
            raise ReplyError(f"unexpected reply {reply!r}")
        if admitted == 1:
            return
        raise StaleTokenError(key, token, int(h))
