"""Logging for the broker process: the journal under systemd, plain stderr otherwise.

How it works: systemd connects a service's stderr to journald and sets $JOURNAL_STREAM to
"<device>:<inode>" of that stream. When stderr's fstat matches, the process is talking to journald:
`configure` then installs systemd-python's JournalHandler (one structured entry per record, with
PRIORITY, LOGGER, CODE_* and our KAFKA_* fields, no double timestamps). Without systemd-python it
writes "<N>message" lines, which journald parses as the priority. Elsewhere it writes a plain
timestamped line to stderr.

Structured context convention: pass `extra={"topic": ..., "partition": ..., "client": ...}` to a log
call, or wrap a logger once with `with_context(logger, topic=..., client=...)`. The journal gets them as
KAFKA_TOPIC, KAFKA_PARTITION, KAFKA_CLIENT (`journalctl KAFKA_TOPIC=orders`); the stderr formatter
appends them as "[topic=orders partition=3 client=rdkafka]".
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from typing import IO, Any

CONTEXT_FIELDS = ("topic", "partition", "client")
_JOURNAL_FIELD = {name: f"KAFKA_{name.upper()}" for name in CONTEXT_FIELDS}
_HANDLER_MARK = "_kafkad_handler"

# sd-daemon(3) priority prefixes, understood by journald on a service's stderr.
_SD_PRIORITY = ((logging.DEBUG, 7), (logging.INFO, 6), (logging.WARNING, 4), (logging.ERROR, 3))


def under_journald(stream: IO[Any] | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """True if `stream` (default stderr) is the journald stream named by $JOURNAL_STREAM."""
    env = os.environ if environ is None else environ
    expected = env.get("JOURNAL_STREAM", "")
    if not expected:
        return False
    target = sys.stderr if stream is None else stream
    try:
        st = os.fstat(target.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return expected == f"{st.st_dev}:{st.st_ino}"


def _context_suffix(record: logging.LogRecord) -> str:
    parts = [
        f"{name}={getattr(record, name)}"
        for name in CONTEXT_FIELDS
        if getattr(record, name, None) is not None
    ]
    return f" [{' '.join(parts)}]" if parts else ""


class ContextFormatter(logging.Formatter):
    """Plain text formatter that appends the topic/partition/client context when present."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        suffix = _context_suffix(record)
        if not suffix:
            return text
        head, sep, tail = text.partition("\n")  # keep the context on the message line, before a traceback
        return head + suffix + sep + tail


class SdPriorityFormatter(ContextFormatter):
    """For journald without systemd-python: "<6>message", journald stores the priority and time."""

    def format(self, record: logging.LogRecord) -> str:
        prio = 2  # critical
        for level, value in _SD_PRIORITY:
            if record.levelno <= level:
                prio = value
                break
        # Each line becomes its own journal entry: prefix every one so a traceback keeps its priority.
        return "\n".join(f"<{prio}>{line}" for line in super().format(record).split("\n"))


class JournalFieldsFilter(logging.Filter):
    """Copies the context attributes to journal field names (JournalHandler sends record.__dict__)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, field in _JOURNAL_FIELD.items():
            value = getattr(record, name, None)
            if value is not None:
                setattr(record, field, str(value))
        return True


class ContextAdapter(logging.LoggerAdapter[logging.Logger]):
    """A logger carrying fixed context; per-call `extra` adds to (and overrides) it."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        base = dict(self.extra) if self.extra else {}
        kwargs["extra"] = {**base, **kwargs.get("extra", {})}
        return msg, kwargs


def with_context(
    logger: logging.Logger,
    *,
    topic: str | None = None,
    partition: int | None = None,
    client: str | None = None,
) -> ContextAdapter:
    """`with_context(log, client=client_id).info("closing: %s", why)` — context travels as fields."""
    fields = {"topic": topic, "partition": partition, "client": client}
    return ContextAdapter(logger, {k: v for k, v in fields.items() if v is not None})


def _journal_handler(identifier: str) -> logging.Handler | None:
    try:
        from systemd.journal import JournalHandler
    except ImportError:
        return None
    handler: logging.Handler = JournalHandler(SYSLOG_IDENTIFIER=identifier)
    handler.addFilter(JournalFieldsFilter())
    return handler


def configure(
    level: int | str = logging.INFO,
    *,
    journal: bool | None = None,
    stream: IO[str] | None = None,
    identifier: str = "kafkad",
    logger: logging.Logger | None = None,
) -> logging.Handler:
    """Install one handler on `logger` (default: the root logger) and return it.

    `journal=None` detects journald from $JOURNAL_STREAM; True/False force the choice. Calling it again
    replaces the handler it installed before (tests, config reload), leaving others' handlers alone.
    """
    target = logging.getLogger() if logger is None else logger
    out = sys.stderr if stream is None else stream
    use_journal = under_journald(out) if journal is None else journal
    handler: logging.Handler | None = _journal_handler(identifier) if use_journal else None
    if handler is None and use_journal:
        handler = logging.StreamHandler(out)
        handler.setFormatter(SdPriorityFormatter("%(name)s: %(message)s"))
    elif handler is None:
        handler = logging.StreamHandler(out)
        handler.setFormatter(ContextFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    setattr(handler, _HANDLER_MARK, True)
    for old in list(target.handlers):
        if getattr(old, _HANDLER_MARK, False):
            target.removeHandler(old)
            old.close()
    target.addHandler(handler)
    target.setLevel(level.upper() if isinstance(level, str) else level)
    # Chatty third-party loggers stay at WARNING unless the broker itself is at DEBUG.
    if target.level > logging.DEBUG:
        logging.getLogger("kazoo").setLevel(logging.WARNING)
    return handler
