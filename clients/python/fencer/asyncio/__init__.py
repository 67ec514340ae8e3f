"""fencer.asyncio: the fencer client for asyncio, on redis-py's redis.asyncio.

The same client as :mod:`fencer` (the same guarantees, errors and
defaults), with coroutines in place of blocking calls and tasks in place of
threads::

    import fencer.asyncio

    async with fencer.asyncio.Client(["127.0.0.1:7379"]) as client:
        async with client.lock("orders/42", ttl=10) as lease:
            await store.write(order, lease.token)

It needs redis-py 5.0.1 or later (``pip install 'fencer[asyncio]'``):
older releases of ``redis.asyncio`` can leave a connection out of step when
a command is cancelled mid-flight (CVE-2023-28858/28859), so that the next
command reads the previous one's reply; a lock client cancels requests all
the time. Importing it with an older redis-py fails with ImportError.
See docs/clients-python.md.
"""

import redis as _redis

from .._conn import redis_version

#: The oldest redis-py that fencer.asyncio runs on (and is tested with).
MIN_REDIS = (5, 0, 1)


if redis_version() < MIN_REDIS:
    raise ImportError(
        f"fencer.asyncio needs redis-py {'.'.join(map(str, MIN_REDIS))} or later, found {_redis.__version__}: "
        "older redis.asyncio releases can leave a connection out of step when a command is cancelled "
        "(CVE-2023-28858/28859). Install fencer[asyncio], or use the threaded fencer.Client."
    )

from ..errors import (  # noqa: E402
    AuthError,
    ClosedError,
    FencerError,
    InvalidArgumentError,
    LeaseLostError,
    LockedError,
    NoLeaderError,
    NoPermError,
    ReleasedError,
    TLSError,
    UncertainError,
)
from .client import Client  # noqa: E402
from .lock import Lock  # noqa: E402

__all__ = [
    "Client",
    "Lock",
    "FencerError",
    "LockedError",
    "LeaseLostError",
    "ReleasedError",
    "NoLeaderError",
    "UncertainError",
    "InvalidArgumentError",
    "AuthError",
    "NoPermError",
    "TLSError",
    "ClosedError",
]
