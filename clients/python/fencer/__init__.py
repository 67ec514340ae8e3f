"""fencer: the Python client of fencer's lock service.

Locks backed by Raft that come with fencing tokens, and fenced writes to
PostgreSQL (fencer.fence_postgres, needs psycopg2) and Redis
(fencer.fence_redis). See docs/clients-python.md.
"""

from .client import Client
from .compat import token_for
from .errors import (
    AuthError,
    ClosedError,
    FencerError,
    InvalidArgumentError,
    LeaseLostError,
    LockedError,
    NoLeaderError,
    NoPermError,
    ReleasedError,
    ReplyError,
    TLSError,
    UncertainError,
    ValueReleasedError,
    error_for_reply,
)
from .fence import StaleTokenError
from .lock import Lock

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Lock",
    "token_for",
    "StaleTokenError",
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
    "ValueReleasedError",
    "ReplyError",
    "error_for_reply",
]
