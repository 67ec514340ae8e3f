"""When a lease is lost: on time while a renewal hangs, and never reported
renewed after the loss was declared."""

from __future__ import annotations

import signal
import socket
import threading
import time

import pytest

import fencer


@pytest.fixture
def silent_addr():
    """An address that accepts TCP connections (the kernel completes them)
    and never answers anything."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    yield f"127.0.0.1:{s.getsockname()[1]}"
    s.close()


def test_loss_signalled_on_time_while_the_renewal_hangs(node_factory, client_factory, silent_addr, name):
    """The renewal is stuck: the node is stopped, and the other address
    takes connections and never answers (AUTH on a new connection, the
    leader probe). The loss is still signalled at the end of the validity,
    by a timer of its own."""
    n = node_factory("--requirepass", "pw", auth={"password": "pw"})
    c = client_factory([n.addr, silent_addr], password="pw")
    calls = []
    lk = c.lock(name, ttl=1.5, on_lost=lambda l, r: calls.append((time.monotonic(), r))).acquire(wait=0)
    n.signal(signal.SIGSTOP)
    try:
        assert lk.lost.wait(1.5 + 5), "the lease was never reported lost"
        at = time.monotonic()
    finally:
        n.signal(signal.SIGCONT)
    assert at <= lk.valid_until + 0.3, f"lost {at - lk.valid_until:.3f}s after the validity ended"
    assert calls and calls[0][0] <= lk.valid_until + 0.3
    assert isinstance(lk.lost_reason, fencer.LeaseLostError) and "validity" in str(lk.lost_reason)


def test_extend_bounded_by_the_validity(node_factory, client_factory, silent_addr, name):
    """extend() gives up when the validity ends: the leader probe and the
    AUTH of a new connection are bounded by the attempt's timeout, which
    the validity left bounds."""
    n = node_factory("--requirepass", "pw", auth={"password": "pw"})
    c = client_factory([n.addr, silent_addr], password="pw")
    lk = c.lock(name, ttl=1.5, auto_renew=False).acquire(wait=0)
    n.signal(signal.SIGSTOP)
    try:
        with pytest.raises(fencer.LeaseLostError):
            lk.extend()
        at = time.monotonic()
    finally:
        n.signal(signal.SIGCONT)
    assert at <= lk.valid_until + 0.5, f"extend() returned {at - lk.valid_until:.3f}s after the validity ended"


def test_extend_does_not_succeed_after_the_loss(node_factory, fencerd_bin, name):
    """A renewal whose reply (1) comes back after the lease was declared
    lost raises the loss's reason: here the client is closed while the
    node, stopped, holds the reply back."""
    n = node_factory()
    c = fencer.Client([n.addr])
    try:
        lk = c.lock(name, ttl=5, auto_renew=False).acquire(wait=0)
        n.signal(signal.SIGSTOP)
        out = {}

        def extend():
            try:
                lk.extend()
                out["ok"] = True
            except BaseException as e:  # noqa: BLE001 - checked below
                out["error"] = e

        t = threading.Thread(target=extend)
        try:
            t.start()
            time.sleep(0.3)  # the EXTEND is sent; its reply is held back
            c.close()
            assert lk.lost.is_set()
        finally:
            n.signal(signal.SIGCONT)
        t.join(10)
        assert not t.is_alive()
        assert "ok" not in out, "extend() reported a renewal of a lease declared lost"
        assert isinstance(out["error"], fencer.ClosedError)
        # The server did extend it (the reply was 1), which is why only the
        # client's declaration can say lost here.
        assert n.raw().execute_command("FENCE.STATUS", name)[0].decode() == lk.owner
    finally:
        c.close()
