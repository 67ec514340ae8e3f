"""Helpers of the fencer.asyncio tests: run a test's coroutine in a fresh
event loop and check that it left no task behind."""

from __future__ import annotations

import asyncio

import redis

from conftest import raw


def run(main, *args):
    """asyncio.run(main(*args)), failing if a task other than main's is
    still pending when main returns (asyncio.run would cancel it quietly)."""

    async def checked():
        result = await main(*args)
        me = asyncio.current_task()
        left = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
        assert not left, f"tasks left behind: {left}"
        return result

    return asyncio.run(checked())


async def settle(client, timeout: float = 2.0) -> None:
    """Wait (at most timeout) for the client's background tasks to end."""
    deadline = asyncio.get_running_loop().time() + timeout
    while client._bg and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.005)
    assert not client._bg, f"background tasks still running after {timeout}s: {client._bg}"


def connected_clients(node) -> int:
    """connected_clients from the node's INFO clients (this check's own
    connection included)."""
    r = raw(node.addr)
    try:
        return int(r.info("clients")["connected_clients"])
    finally:
        r.close()


async def clients_drop_to(node, n: int, timeout: float = 1.0) -> None:
    """Wait until the node counts at most n connections (it notices a
    closed connection a moment after the client closed it): none left
    behind."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = connected_clients(node)
        if got <= n:
            return
        assert asyncio.get_running_loop().time() < deadline, f"the node counts {got} connections, want at most {n}"
        await asyncio.sleep(0.01)


def status(node, name: str):
    r = raw(node.addr)
    try:
        v = r.execute_command("FENCE.STATUS", name)
    finally:
        r.close()
    if v is None:
        return None
    return v[0].decode(), int(v[1])


__all__ = ["run", "settle", "connected_clients", "clients_drop_to", "status", "redis"]
