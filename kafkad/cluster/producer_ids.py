"""Producer ids that never repeat across restarts (Kafka's ProducerIdManager, standalone flavour).

Ids are handed out from a block; before the first id of a block is used, the block's end is written
(temp -> fsync -> rename) to `kafkad-producer-ids` in every log dir, so after a crash the next start
begins at the highest end recorded anywhere. A block write is blocking: `allocate` runs it in an executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Protocol

from kafkad.storage.meta_properties import write_text_atomically

PRODUCER_ID_FILE = "kafkad-producer-ids"


class ProducerIds(Protocol):
    """Where InitProducerId's ids come from: ProducerIdManager standalone, controller/admin.py's
    ZkProducerIds (blocks from /latest_producer_id_block) in a cluster."""

    def load(self) -> None: ...  # blocking: call in executor

    def allocate(self) -> Awaitable[int]: ...


class ProducerIdManager:
    def __init__(self, log_dirs: Sequence[str], block_size: int = 1000) -> None:
        self._dirs = [Path(d) for d in log_dirs]
        self._block_size = block_size
        self._next = 0
        self._end = 0  # exclusive end of the reserved block
        self._lock = asyncio.Lock()

    def load(self) -> None:
        """Blocking: read the highest reserved end over every log dir."""
        high = 0
        for d in self._dirs:
            try:
                text = (d / PRODUCER_ID_FILE).read_text(encoding="ascii").strip()
                high = max(high, int(text.split("=", 1)[-1]))
            except (FileNotFoundError, ValueError):
                continue
        self._next = self._end = high

    def _reserve(self, end: int) -> None:
        for d in self._dirs:
            d.mkdir(parents=True, exist_ok=True)
            write_text_atomically(d / PRODUCER_ID_FILE, f"next.block.start={end}\n")

    async def allocate(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                end = self._next + self._block_size
                await asyncio.get_running_loop().run_in_executor(None, self._reserve, end)
                self._end = end
            pid = self._next
            self._next += 1
            return pid
