"""Kleppmann's scenario with a fencer.asyncio holder: paused past its TTL
(SIGSTOP), it wakes up and writes with its old token after a second client
took the lock and wrote; the fenced stores refuse the late write."""

from test_kleppmann import paused_holder_is_fenced_off


def test_paused_asyncio_holder_is_fenced_off(node, client_factory, name, redis_server, postgres, pg):
    paused_holder_is_fenced_off(node, client_factory, name, redis_server, pg, "asyncio")
