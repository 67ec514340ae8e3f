"""Errors are recognised by their code (the first word of the reply), as
docs/protocol.md lists them: replies from the docs, and real ones."""

from __future__ import annotations

import time

import pytest
import redis

import fencer
from fencer._conn import reply_of
from fencer.errors import classify_reply, parse_not_leader


@pytest.mark.parametrize(
    "reply, cls, transient, uncertain",
    [
        ("UNCERTAIN outcome unknown: context deadline exceeded; the command may or may not have taken effect: retry it with the same owner",
         fencer.UncertainError, True, True),
        ("UNCERTAIN forwarding to the leader at 127.0.0.1:7379 failed after sending: EOF; retry", fencer.UncertainError, True, True),
        ("NOLEADER no leader is available; retry later", fencer.NoLeaderError, True, False),
        ("NOLEADER this node is not a member of a cluster (removed, or not yet joined); send commands to a member",
         fencer.NoLeaderError, True, False),
        ("TIMEOUT the request timed out before it took effect; retry later", fencer.NoLeaderError, True, False),
        ("SHUTDOWN the server is shutting down", fencer.NoLeaderError, True, False),
        ("NOTLEADER - - not the leader, and no leader is known: retry later", fencer.NoLeaderError, True, False),
        ("ERR wrong number of arguments for 'fence.acquire' command", fencer.InvalidArgumentError, False, False),
        ("WRONGPASS invalid username-password pair or user is disabled.", fencer.AuthError, False, False),
        ("NOAUTH Authentication required.", fencer.AuthError, False, False),
        ("NOPERM No permissions to access a key", fencer.NoPermError, False, False),
        ("WRONGTYPE Operation against a key holding the wrong kind of value", fencer.ReplyError, False, False),
        ("RELEASED this value released the key: it holds no lock on it and cannot write it or act on it again; nothing was done",
         fencer.ValueReleasedError, False, False),
        ("LEASELOST k2 the first attempt granted the keys, and some ran out before this one; the rest were released",
         fencer.LeaseLostError, False, False),
        # English that looks like a code elsewhere in the text changes nothing.
        ("ERR UNCERTAIN is not the first word", fencer.InvalidArgumentError, False, False),
    ],
)
def test_classify_by_code(reply, cls, transient, uncertain):
    f = classify_reply(reply)
    assert type(f.error) is cls
    assert f.transient == transient and f.uncertain == uncertain
    assert f.error.code == reply.split()[0] and f.error.reply == reply


def test_uncertain_is_its_own_class():
    assert not issubclass(fencer.UncertainError, (fencer.NoLeaderError, fencer.LockedError, fencer.LeaseLostError))
    assert not issubclass(fencer.LockedError, fencer.UncertainError)


def test_not_leader_fields():
    f = classify_reply("NOTLEADER node-93ad5b1324f42dae 127.0.0.1:7379 not the leader: send commands to the leader")
    assert f.leader == "127.0.0.1:7379" and f.transient
    assert parse_not_leader("node-1 - not the leader, and the leader's client address is not known yet") == ("node-1", "")
    assert parse_not_leader("%2D 127.0.0.1:1 x") == ("-", "127.0.0.1:1")
    assert parse_not_leader("a%zz 127.0.0.1:1 x") == ("", "")


def test_invalid_argument_fields():
    e = classify_reply("ERR invalid argument: ttl: 50ms is outside 100ms..24h0m0s").error
    assert isinstance(e, fencer.InvalidArgumentError) and isinstance(e, ValueError)
    assert e.argument == "ttl" and e.reason == "50ms is outside 100ms..24h0m0s"
    e = classify_reply("ERR value is not an integer or out of range").error
    assert isinstance(e, fencer.InvalidArgumentError) and e.argument is None


def test_reply_of_plain_redis_py_errors():
    """redis-py strips some codes; token_for puts them back from its classes."""
    assert reply_of(redis.exceptions.NoPermissionError("No permissions to access a key")).startswith("NOPERM ")
    assert reply_of(redis.exceptions.AuthenticationError("Authentication required.")).startswith("NOAUTH ")
    assert reply_of(redis.exceptions.ResponseError("invalid argument: key: empty")) == "ERR invalid argument: key: empty"
    assert reply_of(redis.exceptions.ResponseError("UNCERTAIN outcome unknown")) == "UNCERTAIN outcome unknown"
    assert reply_of(redis.exceptions.ConnectionError("refused")) is None


def test_real_invalid_arguments(node, client_factory, name):
    c = client_factory([node.addr])
    with pytest.raises(fencer.InvalidArgumentError) as e:
        c.lock(name, ttl=0.05).acquire()
    assert e.value.argument == "ttl" and e.value.code == "ERR"
    with pytest.raises(fencer.InvalidArgumentError) as e:
        c.lock("k" * 1100, ttl=5).acquire()
    assert e.value.argument == "key" and e.value.code == "ERR"
    with pytest.raises(fencer.InvalidArgumentError) as e:
        c.lock("", ttl=5).acquire()
    assert e.value.argument == "key"


def test_real_wrongtype(node, client_factory, name):
    node.raw().hset(name, "f", "v")
    c = client_factory([node.addr])
    with pytest.raises(fencer.ReplyError) as e:
        c.lock(name, ttl=5, wait=0).acquire()
    assert e.value.code == "WRONGTYPE"


def test_unreachable_is_no_leader(client_factory, name):
    from conftest import free_ports

    (port,) = free_ports(1)
    c = client_factory([f"127.0.0.1:{port}"], failover_timeout=0.5)
    with pytest.raises(fencer.NoLeaderError):
        c.lock(name, ttl=5).acquire()


def test_bad_client_arguments():
    with pytest.raises(fencer.InvalidArgumentError):
        fencer.Client([])
    with pytest.raises(fencer.InvalidArgumentError):
        fencer.Client(["nohostport"])
    with pytest.raises(fencer.InvalidArgumentError):
        fencer.Client(["127.0.0.1:1"], request_timeout=0)
    with pytest.raises(fencer.InvalidArgumentError):
        fencer.Client(["127.0.0.1:1"], username="u")


def test_not_leader_moves_to_the_named_leader():
    """After NOTLEADER naming one of its addresses, the client goes there;
    after another failure, to the next address, asking it who leads."""
    c = fencer.Client(["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"])
    try:
        n = c._nodes
        c._cur, c._probe = 0, False
        c._failed(n[0], classify_reply("NOTLEADER node-x 127.0.0.1:3 not the leader").leader)
        assert c._cur == 2 and not c._probe
        c._failed(n[2], "")
        assert c._cur == 0 and c._probe
        c._failed(n[1], "127.0.0.1:2")  # a stale failure, from a node no longer current
        assert c._cur == 0
    finally:
        c.close()
