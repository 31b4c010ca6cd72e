"""The broker-log gate (tests/integration/log_gate.py) as BrokerProcess and KafkadCluster apply it: an ERROR
record or a traceback fails, one a test names in expect_errors does not, INFO/WARNING lines never do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.cluster import KafkadCluster
from tests.integration.broker_process import BrokerProcess
from tests.integration.log_gate import entries, unexpected_errors

CLEAN = (
    "--- start 04:16:32 ---\n"
    "2026-11-27 04:16:32,101 INFO    kafkad.service.main: kafkad 0.1 started: PLAINTEXT://127.0.0.1:9092\n"
    "2026-11-27 04:16:33,202 WARNING kafkad.network.connection: 127.0.0.1:5555: a request's handler was "
    "cancelled; closing the connection\n"
)
WRITER_RACE = (
    "2026-11-27 04:16:34,303 ERROR   kafkad.network.connection: 127.0.0.1:5555: response writer failed\n"
    "Traceback (most recent call last):\n"
    '  File "kafkad/network/connection.py", line 372, in _writer\n'
    "    self._slots.popleft()\n"
    "IndexError: pop from an empty deque\n"
    "2026-11-27 04:16:35,404 INFO    kafkad.network.server: stopped\n"
)
BARE_TRACEBACK = (  # an exception that escaped every handler, written to stderr without a log record
    "--- start 04:17:00 ---\n"
    "Traceback (most recent call last):\n"
    '  File "kafkad/service/main.py", line 80, in main\n'
    "RuntimeError: boom\n"
)


def test_entries_and_levels() -> None:
    assert unexpected_errors(CLEAN) == []
    bad = unexpected_errors(CLEAN + WRITER_RACE)
    assert len(bad) == 1 and bad[0].startswith("2026-11-27 04:16:34,303 ERROR")
    assert bad[0].endswith("IndexError: pop from an empty deque"), "the traceback belongs to its record"
    assert unexpected_errors(CLEAN + BARE_TRACEBACK) == [BARE_TRACEBACK.rstrip("\n")]
    assert len(entries(CLEAN + BARE_TRACEBACK)) == 4, "the harness's start marker opens an entry"
    critical = "2026-11-27 04:16:36,000 CRITICAL kafkad.x: disk gone\n"
    assert len(unexpected_errors(critical)) == 1


def test_expected_patterns_match_the_head_or_the_traceback() -> None:
    text = CLEAN + WRITER_RACE
    assert unexpected_errors(text, [r"response writer failed"]) == []
    assert unexpected_errors(text, [r"IndexError: pop from an empty deque"]) == []
    assert len(unexpected_errors(text, [r"log dir .* failed"])) == 1


def test_broker_process_fails_its_test_on_an_error_unless_expected(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "b")  # never started: the gate reads only the log file
    b.log_path.write_text(CLEAN + WRITER_RACE)
    with pytest.raises(AssertionError, match="response writer failed"):
        b.__exit__(None, None, None)
    b.expect_errors.append(r"response writer failed")
    b.__exit__(None, None, None)
    # with the test's own exception in flight the gate stays quiet (the test's failure is the report)
    b.expect_errors.clear()
    b.__exit__(RuntimeError, RuntimeError("test failed"), None)


def test_cluster_checks_every_broker(tmp_path: Path) -> None:
    c = KafkadCluster(tmp_path / "c", "127.0.0.1:1", 3)  # never started
    for b in c.brokers.values():
        b.log_path.write_text(CLEAN)
    c.check_logs()
    c.broker(3).log_path.write_text(CLEAN + WRITER_RACE)
    with pytest.raises(AssertionError, match="broker 3"):
        c.check_logs()
    c.broker(2).expect_errors.append(r"IndexError")  # a broker's own allowance counts for the cluster
    c.check_logs()
    c.broker(2).expect_errors.clear()
    c.expect_errors.append(r"response writer failed")
    c.check_logs()


def test_a_start_that_lost_its_port_retries_and_leaves_the_gated_log_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI failure of session 9: a broker's first port was taken before kafkad bound it; the harness
    retried on a fresh port, but the lost start's CRITICAL line stayed in kafkad.log and failed the gate."""
    import socket

    from tests.integration import broker_process

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    picks = iter([taken.getsockname()[1]])
    real_free_port = broker_process.free_port
    monkeypatch.setattr(broker_process, "free_port", lambda: next(picks, None) or real_free_port())
    try:
        b = BrokerProcess(tmp_path / "b")
        lost = b.port
        with b:
            assert b.port != lost
        side = (tmp_path / "b" / f"kafkad.port-race-{lost}.log").read_text()
        assert "address already in use" in side
        whole = b.log_text(since_start=False)
        assert "address already in use" not in whole and " started: " in whole
    finally:
        taken.close()
