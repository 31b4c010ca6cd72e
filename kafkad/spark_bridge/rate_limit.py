"""Token bucket and exponential backoff for the shipper (time and sleeping injected, so tests never sleep).

`TokenBucket.acquire(n)` blocks the calling thread (the shipper's worker, never the event loop) until
`n` bytes may pass. Tokens refill at `rate` per second up to `burst`; a request larger than the bucket
is allowed to drive it negative (it then waits for the debt), so throughput over any window longer than
a few chunks stays within burst/window of the rate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkad.clock import Clock

Sleep = Callable[[float], bool]  # sleep(seconds) -> False when asked to stop early


class TokenBucket:
    """Blocking: call from a worker thread."""

    def __init__(self, rate_bytes_per_sec: int, burst: int, clock: Clock, sleep: Sleep) -> None:
        if rate_bytes_per_sec <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate_bytes_per_sec
        self.burst = max(1, burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = clock.monotonic_ms()

    def _refill(self) -> None:
        now = self._clock.monotonic_ms()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate / 1000.0)
        self._last = now

    def acquire(self, n: int) -> bool:
        """Take `n` tokens, waiting as needed; False if the sleep was interrupted (stop requested)."""
        self._refill()
        self._tokens -= n
        while self._tokens < 0:
            if not self._sleep(-self._tokens / self.rate):
                return False
            self._refill()
        return True


def chunk_size_for(rate_bytes_per_sec: int, max_chunk: int = 1 << 20) -> int:
    """Copy chunk: at most 1/20 s worth of the rate, so the limit holds smoothly (4 KiB floor)."""
    if rate_bytes_per_sec <= 0:
        return max_chunk
    return max(4096, min(max_chunk, rate_bytes_per_sec // 20))


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff: initial, doubled per failure, capped."""

    initial_ms: int = 100
    max_ms: int = 30_000
    multiplier: float = 2.0

    def delay_ms(self, failures: int) -> int:
        """Delay before the retry following the `failures`-th consecutive failure (1-based)."""
        # the exponent is capped: past 64 doublings any delay is max_ms, and a float power of a long
        # outage's failure count overflows (OverflowError after ~1,000 consecutive failures)
        exponent = min(max(0, failures - 1), 64)
        return int(min(self.max_ms, self.initial_ms * self.multiplier**exponent))
