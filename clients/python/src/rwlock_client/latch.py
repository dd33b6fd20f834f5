"""`CountDownLatch`: Redisson's RCountDownLatch (`LATCH.*`), sync."""

from __future__ import annotations

from typing import Optional

from ._latch import CountDownLatchCommon
from ._link import converse


class CountDownLatch(CountDownLatchCommon):
    """Redisson's `RCountDownLatch`: `wait()` returns once `count_down()`
    was called as often as `try_set_count` said, by any thread, process or
    Redisson client.

    ::

        done = CountDownLatch(redis.Redis(port=6399), "batch:7")
        done.try_set_count(3)
        ...                          # three workers call done.count_down()
        if done.wait(timeout=60):    # on the server: LATCH.AWAIT … BLOCK
            ...
    """

    def try_set_count(self, count: int) -> bool:
        """Sets the count (0 or more) when there is no latch (True); else
        changes nothing (False)."""
        return converse(self.client, self.name, self._trying_to_set(count))

    def count_down(self) -> None:
        """Counts down once; at zero the latch is deleted and its waiters
        woken. Not resent after a lost reply (it would count twice)."""
        converse(self.client, self.name, self._counting_down())

    def count(self) -> int:
        """The count (Redisson's `getCount`; 0 without a latch)."""
        return converse(self.client, self.name, self._reading())

    def delete(self) -> bool:
        """Deletes the latch, waking its waiters; False when there was none."""
        return converse(self.client, self.name, self._deleting())

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Redisson's `await`: True once the count is zero (or the latch
        gone), False when `timeout` seconds ran out first; None (the
        default) waits without limit, 0 only looks. The wait is on the
        server, any longer than the socket timeout."""
        return converse(self.client, self.name, self._awaiting(timeout))
