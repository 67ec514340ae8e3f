"""Giving up a wait: the rounds leave the queue, nothing of ours is granted
afterwards, and the caller sees LockedError or the exception that stopped it."""

from __future__ import annotations

import random
import signal
import threading
import time

import pytest

import fencer
import fencer._wait as fwait
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


def test_cancelled_round_never_queues(node_factory, client_factory, monkeypatch, name):
    """A round cancelled between its connect and its send does not send.
    Its thread being descheduled there has no trigger a test can use, so a
    test hook delays it: the acquire gives up meanwhile, the holder then
    releases, and the lock must stay free."""
    n = node_factory()
    holder = client_factory([n.addr]).lock(name, ttl=5, auto_renew=False).acquire()
    monkeypatch.setattr(fwait, "_before_send", lambda: time.sleep(0.4))
    c = client_factory([n.addr])
    with pytest.raises(fencer.LockedError):
        c.lock(name, ttl=5).acquire(wait=0.1)
    holder.release()
    time.sleep(0.6)  # the delayed round would have queued and been granted by now
    assert status(n, name) is None, "a round of the acquire that gave up was granted the lock"
    assert waiters(n) == 0


class Interrupt(BaseException):
    """Not an Exception, as KeyboardInterrupt is not."""


def test_interrupted_wait_leaves_the_queue(node_factory, client_factory, name):
    """An exception from a signal handler stops a waiting acquire: its
    rounds leave the queue and the owner is released, so the lock is not
    granted to it afterwards."""
    n = node_factory()
    holder = client_factory([n.addr]).lock(name, ttl=10).acquire()
    c = client_factory([n.addr])

    def interrupt(signum, frame):
        raise Interrupt()

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(Interrupt):
            c.lock(name, ttl=20).acquire(wait=20)  # rounds of 10 s
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    # Well before its round would have ended by itself.
    wait_for(lambda: waiters(n) == 0, 3, "the interrupted acquire left the queue")
    holder.release()
    time.sleep(0.5)
    assert status(n, name) is None, "the interrupted acquire was granted the lock"


def test_interrupted_acquire_releases_its_grant(node, client_factory, monkeypatch, name):
    """An exception after the server granted the lock (here from a patched
    parse_grant) releases the grant in the background."""
    import fencer.client as fclient

    def broken(*a):
        raise Interrupt()

    monkeypatch.setattr(fclient, "parse_grant", broken)
    c = client_factory([node.addr])
    with pytest.raises(Interrupt):
        c.lock(name, ttl=10).acquire(wait=0)
    wait_for(lambda: status(node, name) is None, 3, "the grant of the interrupted acquire released")
