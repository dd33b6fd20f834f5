"""What the sync and asyncio count-down latches share, none of it I/O: the
`LATCH.*` commands (docs/design.md §16) as conversations (`_base`)."""

from __future__ import annotations

from typing import Any, Optional

from ._base import Conversation, flag, nothing, one
from ._core import Args, block_of, reply_timeout


def _count(count: int) -> int:
    """A latch's count: 0 or more, as `java.util.concurrent.CountDownLatch`
    takes (the server refuses a negative one too)."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be an integer of 0 or more, not {count!r}")
    return count


class CountDownLatchCommon:
    """Redisson's `RCountDownLatch` on the `LATCH.*` commands, over the
    string `name` holding the count (no key: count 0). A wait for zero is
    `LATCH.AWAIT name BLOCK ms` on the server, never a poll nor a
    subscription, and reads its reply on a connection of its own within
    the wait and a margin, whatever the socket timeout. A count-down
    carries no request id (the command has none): its lost reply is raised,
    never sent again, since a second count-down would count twice."""

    def __init__(self, client: Any, name: str) -> None:
        self.client, self.name = client, name

    def _trying_to_set(self, count: int) -> Conversation[bool]:
        return one(["LATCH.TRYSETCOUNT", self.name, _count(count)], flag)

    def _counting_down(self) -> Conversation[None]:
        return one(["LATCH.COUNTDOWN", self.name], nothing)

    def _reading(self) -> Conversation[int]:
        return one(["LATCH.COUNT", self.name], int)

    def _deleting(self) -> Conversation[bool]:
        return one(["LATCH.DELETE", self.name], flag)

    def _awaiting(self, timeout: Optional[float]) -> Conversation[bool]:
        """`LATCH.AWAIT name [BLOCK ms]`: 1 once the count is zero (or the
        latch gone), 0 when the wait ran out."""
        block_ms = block_of(timeout)
        args: Args = ["LATCH.AWAIT", self.name]
        if block_ms is not None:
            args += ["BLOCK", block_ms]
        return one(args, flag, reply_timeout(block_ms))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
