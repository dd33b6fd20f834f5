"""The asyncio watchdog: the sync `rwlock_client.watchdog` on the event
loop. A hold's next renewal is a timer of its loop (`call_later`: the
loop's own heap of deadlines), so a hold released before its first renewal
(10 s with the default lease) costs no task; a renewal that comes due runs
as a task of its own."""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Optional


class Watchdog:
    """Awaits `renew` every `lease / 3` seconds (counted from the end of the
    previous renewal) until `stop()`. A renewal returning False, or none
    succeeding for a whole lease (server unreachable), awaits `on_lost`
    once and ends the renewals. Made in a running event loop, whose timers
    and tasks it uses."""

    def __init__(
        self,
        lease: float,
        renew: Callable[[], Awaitable[bool]],
        on_lost: Callable[[], Awaitable[None]],
    ) -> None:
        self._lease, self._renew, self._on_lost = lease, renew, on_lost
        self._loop = asyncio.get_running_loop()
        self._last_renewal = time.monotonic()
        self._task: Optional[asyncio.Task[None]] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._stopped = False
        self._schedule()

    def _schedule(self) -> None:
        self._timer = self._loop.call_later(self._lease / 3, self._due)

    def _due(self) -> None:
        self._timer = None
        self._task = self._loop.create_task(self._renewal())

    async def _renewal(self) -> None:
        try:
            held = await self._renew()
        except Exception:  # the connection: try again next time, within the lease
            if time.monotonic() - self._last_renewal < self._lease:
                self._again()
                return
            held = False
        if self._stopped:
            return
        if not held:
            self._stopped = True
            await self._on_lost()
            return
        self._last_renewal = time.monotonic()
        self._again()

    def _again(self) -> None:
        self._task = None
        if not self._stopped:
            self._schedule()

    def stop(self) -> None:
        """Ends the renewals: cancels the timer, or the renewal under way."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            self._task.cancel()
            self._task = None
