"""uvicorn's settings for `task=serve`: the connection cap, the keep-alive timeout and a deadline for each
request's head."""

from __future__ import annotations

import asyncio
from typing import Any

from common.settings import ServeSettings


def bounded_h11(head_timeout_s: float) -> type:
    """uvicorn's h11 protocol, closing a connection whose request head is not complete `head_timeout_s` after it
    opened (or after its last response): uvicorn alone lets one that sends its headers a byte at a time stay open."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11(H11Protocol):
        head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.head_timer = self.loop.call_later(head_timeout_s, self.head_timed_out)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                if self.head_timer is not None:
                    self.head_timer.cancel()
                self.head_timer = self.loop.call_later(head_timeout_s, self.head_timed_out)

        def head_timed_out(self) -> None:
            if self.cycle is None or self.cycle.response_complete:  # no request under way: its head is late
                self.timeout_keep_alive_handler()  # closes the connection

        def connection_lost(self, exc: Exception | None) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
            super().connection_lost(exc)

    return BoundedH11


def server_args(settings: ServeSettings) -> dict[str, Any]:
    """`uvicorn.run(app, **server_args(s))`'s settings for serve.*."""
    return {"host": settings.host, "port": settings.port, "log_level": "info", "timeout_graceful_shutdown": 5,
            "limit_concurrency": settings.max_connections, "timeout_keep_alive": settings.keep_alive_s,
            "http": bounded_h11(settings.read_timeout_s)}
