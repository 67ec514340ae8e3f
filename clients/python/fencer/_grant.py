"""What the client, its locks and its waits share: defaults, the clock,
durations on the wire, and the grant that FENCE.ACQUIRE returns.

Below client.py, lock.py and _wait.py (and fencer.asyncio), so that each of
them imports only modules below itself.
"""

from __future__ import annotations

import random
import time
from typing import Optional

from .errors import FencerError

# Defaults, as the Go client's.
DEFAULT_REQUEST_TIMEOUT = 5.0
DEFAULT_FAILOVER_TIMEOUT = 15.0
DEFAULT_DRIFT = 0.01
DEFAULT_TTL = 8.0
# Added to every drift allowance, as redsync does.
DRIFT_FLOOR = 0.002
# Backoff between rounds of attempts over all nodes.
MIN_BACKOFF = 0.05
MAX_BACKOFF = 1.0
# Bounds asking a node who leads.
LEADER_PROBE_TIMEOUT = 1.0

# The pauses before each repeat of a background release (an acquire given
# up, cancelled or of unknown outcome) that the server answered "not held".
# Such a release may have come before a grant of the same owner still on
# its way: a request sent on a connection since closed, or a hand-off to a
# wait round whose connection the server has not yet seen close. fencerd
# neither remembers a release by an owner that does not hold the lock nor
# drops the owner's waits for it, so the release is sent again for about a
# second.
RELEASE_AGAIN = (0.05, 0.1, 0.2, 0.4)

now = time.monotonic


def jitter(d: float) -> float:
    """Spread d over [d/2, d) so that clients do not retry in step."""
    return d / 2 + random.random() * d / 2


def millis(seconds: float) -> int:
    """Convert seconds for the wire: whole milliseconds, at least 1."""
    return max(int(seconds * 1000), 1)


def text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


class Grant:
    """A granted acquire: its token, TTL, and when the request was sent."""

    __slots__ = ("token", "ttl", "sent")

    def __init__(self, token: int, ttl: float, sent: float):
        self.token = token
        self.ttl = ttl
        self.sent = sent


def parse_grant(v, ttl: float, sent: float) -> Optional[Grant]:
    """Read FENCE.ACQUIRE's reply: [token, granted-ttl-ms], or None if null."""
    if v is None:
        return None
    if not isinstance(v, list) or len(v) != 2 or not all(isinstance(x, int) for x in v) or v[0] <= 0 or v[1] <= 0:
        raise FencerError(f"unexpected reply to FENCE.ACQUIRE: {v!r}")
    return Grant(v[0], min(ttl, v[1] / 1000.0), sent)
