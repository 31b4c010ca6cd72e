"""Logging setup: journald detection, structured journal fields, plain stderr format."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkad.service import logging_setup
from kafkad.service.logging_setup import configure, under_journald, with_context


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    lg = logging.getLogger("kafkad.test.ops")
    lg.propagate = False
    yield lg
    for h in list(lg.handlers):
        lg.removeHandler(h)
    lg.propagate = True


def test_under_journald_matches_device_and_inode(tmp_path: Path) -> None:
    with open(tmp_path / "stream", "w") as f:
        st = os.fstat(f.fileno())
        assert under_journald(f, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        assert not under_journald(f, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino + 1}"})
        assert not under_journald(f, {})
    assert not under_journald(io.StringIO(), {"JOURNAL_STREAM": "1:2"})  # no fileno


def test_plain_stderr_format_carries_context(logger: logging.Logger) -> None:
    out = io.StringIO()
    configure("DEBUG", journal=False, stream=out, logger=logger)
    assert logger.level == logging.DEBUG
    with_context(logger, topic="orders", partition=3).warning(
        "slow append %d ms", 12, extra={"client": "rdkafka"}
    )
    logger.info("no context")
    lines = out.getvalue().splitlines()
    assert lines[0].endswith(
        "WARNING kafkad.test.ops: slow append 12 ms [topic=orders partition=3 client=rdkafka]"
    )
    assert lines[1].endswith("INFO    kafkad.test.ops: no context")


def test_configure_twice_replaces_its_own_handler_only(logger: logging.Logger) -> None:
    other = logging.NullHandler()
    logger.addHandler(other)
    first = configure(journal=False, stream=io.StringIO(), logger=logger)
    second = configure("WARNING", journal=False, stream=io.StringIO(), logger=logger)
    assert first not in logger.handlers
    assert second in logger.handlers and other in logger.handlers
    assert logger.level == logging.WARNING


def test_journal_handler_sends_structured_fields(logger: logging.Logger) -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    handler = configure(journal=True, logger=logger, identifier="kafkad-test")
    assert type(handler).__name__ == "JournalHandler"

    def fake_send(message: str, /, **fields: Any) -> None:  # record.__dict__ holds "msg" and "message"
        sent.append((message, fields))

    handler.send = fake_send  # type: ignore[attr-defined]
    with_context(logger, topic="orders", partition=0, client="c-1").error("disk full")
    logger.info("plain")
    (msg, fields), (msg2, fields2) = sent
    assert msg == "disk full"
    assert fields["PRIORITY"] == "3"
    assert fields["SYSLOG_IDENTIFIER"] == "kafkad-test"
    assert fields["LOGGER"] == "kafkad.test.ops"
    assert (fields["KAFKA_TOPIC"], fields["KAFKA_PARTITION"], fields["KAFKA_CLIENT"]) == (
        "orders",
        "0",
        "c-1",
    )
    assert msg2 == "plain" and fields2["PRIORITY"] == "6" and "KAFKA_TOPIC" not in fields2


def test_journal_without_systemd_python_uses_priority_prefixes(
    logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging_setup, "_journal_handler", lambda identifier: None)
    out = io.StringIO()
    configure(journal=True, stream=out, logger=logger)
    logger.warning("careful", extra={"topic": "t"})
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed")
    lines = out.getvalue().splitlines()
    assert lines[0] == "<4>kafkad.test.ops: careful [topic=t]"
    assert lines[1] == "<3>kafkad.test.ops: failed"
    assert all(line.startswith("<3>") for line in lines[2:]) and "ValueError: boom" in lines[-1]
