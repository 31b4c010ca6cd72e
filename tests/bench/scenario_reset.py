"""Out-of-range consumer reset (issue 15's "within about a second", issue 24: a figure, not a test bound).

Per Python client stack (confluent-kafka, kafka-python, aiokafka; the functions of
tests/integration/test_offset_reset_stacks.py): a one-partition topic of ten records, a consumer placed past
the end (offset 1000) with auto.offset.reset=earliest, timed from its placement (assign + seek) to its first
record (offset 0). Baseline of the same run: the same stack placed at offset 0 (a valid position), timed the
same way, so the ratio is what the OFFSET_OUT_OF_RANGE round trip and the reset add to a client's start.
"""

from __future__ import annotations

import logging
import time

from tests.bench.context import Context
from tests.bench.stats import Row, figure, ratio
from tests.integration.test_offset_reset_stacks import STACKS, _topic

log = logging.getLogger(__name__)


def _first_record_s(ctx: Context, stack: str, start: int) -> float:
    topic = _topic(ctx.broker, before_start=False)
    placed: list[float] = []
    first = STACKS[stack](
        ctx.broker.bootstrap, topic, start, "earliest", lambda: placed.append(time.monotonic())
    )
    took = time.monotonic() - placed[0]
    if first != 0:
        raise AssertionError(f"{stack}: first record at offset {first}, expected 0")
    return took


def offset_reset(ctx: Context) -> None:
    for stack in STACKS:
        reset_s: list[float] = []
        valid_s: list[float] = []
        for _ in range(ctx.settings.runs):
            valid_s.append(_first_record_s(ctx, stack, 0))
            reset_s.append(_first_record_s(ctx, stack, 1000))
        k = figure(f"{stack} reset", "ms", [s * 1000 for s in reset_s])
        b = figure(f"{stack} valid start", "ms", [s * 1000 for s in valid_s])
        log.info("reset %s: %s ms (valid start %s ms)", stack, k.runs, b.runs)
        ctx.rows.append(
            Row(
                "reset",
                f"{stack}: placed past the end to first record (earliest) ms",
                k,
                b,
                "same client placed at a valid offset",
                ratio("", k, b),
            )
        )
