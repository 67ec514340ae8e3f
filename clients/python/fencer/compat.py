"""token_for: the fencing token of a lock taken with another Redis lock client."""

from __future__ import annotations

from typing import Union

import redis

from ._conn import reply_of
from .errors import LeaseLostError, error_for_reply


def token_for(redis_client, key: Union[str, bytes], value: Union[str, bytes]) -> int:
    """Return the fencing token of the lock ``key`` that ``value`` holds.

    For users of redis-py's ``Lock`` (or any lock client that takes a lock
    with ``SET key value NX PX ms``) pointed at fencer: one ``FENCE.TOKEN
    key value`` on the same client, right after the lock is taken::

        lock = r.lock("orders/42", timeout=10)
        lock.acquire()
        token = token_for(r, lock.name, lock.local.token)

    Raises LeaseLostError if ``value`` does not hold ``key`` (the lock
    expired or was never taken), and the client's exception for an error
    reply, by its code (NOAUTH, NOPERM, UNCERTAIN: read again ...).
    """
    try:
        v = redis_client.execute_command("FENCE.TOKEN", key, value)
    except redis.exceptions.RedisError as e:
        raw = reply_of(e)
        if raw is None:
            raise
        raise error_for_reply(raw) from e
    if v is None:
        k = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
        raise LeaseLostError(f"lock {k!r} is not held by the given value")
    return int(v)
