"""The lease renewer: Redisson's lock watchdog. While a hold taken without a
lease lives, it renews the lease every third of it; it stops when told to,
or when the server says the owner no longer holds the lock (the lease ran
out, or the lock was forced open), which it reports as a loss."""

from __future__ import annotations

import threading
import time
from typing import Callable


class Watchdog(threading.Thread):
    """Calls `renew` every `lease / 3` seconds until `stop()`. A renewal
    replying False, or none succeeding for a whole lease (server
    unreachable), calls `on_lost` once and ends the thread."""

    def __init__(
        self, name: str, lease: float, renew: Callable[[], bool], on_lost: Callable[[], None]
    ) -> None:
        super().__init__(daemon=True, name=f"rwlock-watchdog {name}")
        self._lease, self._renew, self._on_lost = lease, renew, on_lost
        self._stopped = threading.Event()

    def run(self) -> None:
        last_renewal = time.monotonic()
        while not self._stopped.wait(self._lease / 3):
            try:
                held = self._renew()
            except Exception:  # the connection: try again next time, within the lease
                if time.monotonic() - last_renewal < self._lease:
                    continue
                held = False
            if self._stopped.is_set():
                return
            if not held:
                self._on_lost()
                return
            last_renewal = time.monotonic()

    def stop(self) -> None:
        self._stopped.set()
