"""The fencing rule, shared by the fenced stores (Go: package fence).

A write carrying token to a resource is admitted if token is at least the
highest token already admitted for that resource (equal tokens are
admitted: the same holder writes again), and refused otherwise. The check,
the write and recording the token are one atomic step in each store.
"""

from __future__ import annotations

__all__ = ["StaleTokenError", "check"]


class StaleTokenError(Exception):
    """A write refused because its token is lower than one already admitted.

    ``resource`` is what was written to, ``token`` the token the write
    carried, ``highest`` the highest token already admitted (> token): the
    writer's lease has passed to someone else.
    """

    def __init__(self, resource: str, token: int, highest: int):
        super().__init__(f"fence: stale token {token} for {resource!r}: token {highest} was already admitted")
        self.resource = resource
        self.token = token
        self.highest = highest

    def __reduce__(self):
        return (StaleTokenError, (self.resource, self.token, self.highest))


def check(resource: str, token: int, highest: int) -> None:
    """Apply the rule: raise StaleTokenError if token < highest.

    A resource that never admitted a write has highest 0.
    """
    if token < highest:
        raise StaleTokenError(resource, token, highest)
