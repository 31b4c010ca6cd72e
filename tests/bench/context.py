"""What every scenario shares: the mode's sizes and durations, the work dir, the worker pool, the servers,
and the rows gathered so far."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from tests.bench.servers import ChildServer, Target, broker_target
from tests.bench.stats import Row
from tests.bench.workers import Pool
from tests.integration.broker_process import BrokerProcess

GiB = 1 << 30
MiB = 1 << 20


class Mode(Enum):
    QUICK = "quick"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class Settings:
    runs: int
    produce_s: float
    small_s: float
    fetch_bytes: int
    latency_rates: tuple[int, ...]
    latency_s: float
    partition_counts: tuple[int, ...]
    recovery_bytes: int
    recovery_partitions: int


SETTINGS = {
    Mode.QUICK: Settings(3, 1.0, 2.0, 256 * MiB, (1_000, 10_000), 3.0, (1, 100, 1000), 1 * GiB, 100),
    Mode.FULL: Settings(5, 3.0, 5.0, 1 * GiB, (1_000, 10_000, 50_000), 10.0, (1, 100, 1000), 10 * GiB, 100),
}


@dataclass(slots=True)
class Context:
    mode: Mode
    settings: Settings
    work: Path
    pool: Pool
    broker: BrokerProcess
    sink: ChildServer
    rows: list[Row] = field(default_factory=list)
    series: dict[str, object] = field(default_factory=dict)  # raw data for plots and the JSON

    @property
    def kafkad(self) -> Target:
        return broker_target(self.broker)

    @property
    def baseline(self) -> Target:
        return self.sink.target


class RssSampler:
    """Peak RSS of a process, sampled every 50 ms on a thread while the with-block runs."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.target.rss_bytes())
            time.sleep(0.05)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.target.rss_bytes())
