"""Giving up a wait: the rounds leave the queue, nothing of ours is granted
afterwards, and the caller sees LockedError or the exception that stopped it."""

from __future__ import annotations

import random
import signal
import threading
import time

import pytest

import fencer
from conftest import wait_for
from test_lock import status, waiters


def test_many_deadline_give_ups_raise_locked_error_only(node_factory, client_factory, name):
    """Deadlines land at any point of a round (connecting, waiting, being
    answered): each give-up raises LockedError, and none leaves a waiter."""
    n = node_factory()
    holder = client_factory([n.addr]).lock(name, ttl=30).acquire()
    c = client_factory([n.addr])
    rnd = random.Random(21)
    errors = []
    for i in range(60):
        try:
            c.lock(name, ttl=10).acquire(wait=rnd.uniform(0.01, 0.08))
            errors.append(f"give-up {i}: granted")
        except fencer.LockedError:
            pass
        except BaseException as e:  # noqa: BLE001 - the point of the test
            errors.append(f"give-up {i}: {e!r}")
    assert not errors, errors
    wait_for(lambda: waiters(n) == 0, 5, "every waiter left the queue")
    holder.release()
    time.sleep(0.3)
    assert status(n, name) is None, "a waiter that gave up was granted the lock"
