"""The "no ERROR in the logs" gate: an ERROR/CRITICAL record or a traceback in a broker's log fails the test,
unless the test names it as expected.

A log is cut into entries: a line starting with kafkad's record head (`<date> <time> <LEVEL>`) or the
harness's `--- start` marker opens one, and every line that does not (a traceback, a multi-line message, raw stderr) belongs to the entry before it.
An entry is bad when its level is ERROR or CRITICAL or its text holds a traceback ("Traceback (most recent
call last)", asyncio's "Exception in callback"); a bad entry is expected when one of the test's
`expect_errors` regexes matches somewhere in its text (re.search, so the head line or the traceback's last
line both work). BrokerProcess and KafkadCluster check their brokers' whole logs (every restart) when they
stop at a test's end; tests extend `expect_errors` for the faults they cause, each with a reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

_HEAD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (\w+)")
_START = "--- start "  # BrokerProcess's marker before each start: whatever follows is a new process's
_TRACE = re.compile(r"Traceback \(most recent call last\)|^Exception in callback", re.MULTILINE)
_BAD_LEVELS = {"ERROR", "CRITICAL"}


def entries(text: str) -> list[str]:
    """`text` cut into log entries (a record's head line and its continuation lines)."""
    out: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if current and (_HEAD.match(line) or line.startswith(_START)):
            out.append("\n".join(current))
            current = []
        current.append(line)
    if current:
        out.append("\n".join(current))
    return out


def is_bad(entry: str) -> bool:
    head = _HEAD.match(entry)
    return (head is not None and head.group(1) in _BAD_LEVELS) or _TRACE.search(entry) is not None


def unexpected_errors(text: str, expected: Iterable[str | re.Pattern[str]] = ()) -> list[str]:
    """The bad entries of `text` that no pattern of `expected` matches."""
    patterns = [re.compile(p) if isinstance(p, str) else p for p in expected]
    return [e for e in entries(text) if is_bad(e) and not any(p.search(e) for p in patterns)]


def read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def check_logs(logs: Sequence[tuple[str, Path]], expected: Iterable[str | re.Pattern[str]] = ()) -> None:
    """AssertionError listing every unexpected ERROR/traceback entry of the named logs."""
    expected = list(expected)
    found: list[str] = []
    for name, path in logs:
        bad = unexpected_errors(read_text(path), expected)
        found += [f"--- {name} ({path}):\n{e[:3000]}" for e in bad[:10]]
        if len(bad) > 10:
            found.append(f"--- {name}: and {len(bad) - 10} more")
    if found:
        raise AssertionError(
            "ERROR lines or tracebacks in broker logs that the test does not expect "
            "(name them in expect_errors with a reason, or fix them):\n" + "\n".join(found)
        )
