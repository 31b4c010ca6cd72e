"""A transactional consume-transform-produce workload of real confluent-kafka clients, recorded into a
TxnHistory (txn_history.py) for txn_checker.py.

- Source: one idempotent acks=all producer writes unique input values (`i-<n>`) round-robin to the input
  topic's partitions; every acknowledged one is an `input` op.
- Processors: each a read_committed group consumer of the input topic (auto commit off) and a
  transactional producer. Per consumed batch, one transaction: every input record becomes an output record
  `<txn>|<input>` on the same partition of the output topic, then send_offsets_to_transaction with the
  group's metadata, then commit (one in `abort_every` is aborted on purpose, and its input consumed again).
  An abortable error aborts and rewinds to the batch's first offsets; a fatal one (fenced, producer state
  lost) replaces the producer (init_transactions fences the old one and aborts its transaction) and rewinds
  the consumer to the group's committed offsets. Outcomes: ok (commit acknowledged), failed (abort
  acknowledged), unknown (anything else). The group's offsets start at 0 (committed before the processors
  start) and the processors run with auto.offset.reset=error: librdkafka 2.16 starts a partition at
  auto.offset.reset when an OffsetFetch answered UNSTABLE_OFFSET_COMMIT after a rebalance changed its
  assignment (rdkafka_assignment.c puts it back on the pending list with offset INVALID; seen with
  debug=cgrp, and Kafka answers UNSTABLE the same way), which with `earliest` re-reads the input and
  breaks exactly-once on the client side. With `error` the processor sees _AUTO_OFFSET_RESET and rejoins.
  Likewise for NOT_COORDINATOR on the committed-offsets fetch ("Failed to fetch committed offsets"):
  librdkafka 2.16 does not retry it and leaves those partitions unstarted until the next rebalance, which a
  stable group never has (docs/chaos.md: a coordinator restarted within its old ZooKeeper session answered
  it before the controller moved its leaderships; Kafka answers NOT_COORDINATOR the same way once it
  serves). The processor rejoins on it, counted in `offset_fetch_rejoins`.
- `kill_processor()`: a processor dies mid-transaction: its producer is abandoned with the transaction
  open (never used again, so only the coordinator's timeout can end it; a `died` op), its consumer closed;
  the processor comes back with a new transactional id and redoes the input from the committed offsets.
- Readers: read_committed assign() readers of the output topic from the beginning; an LSO monitor samples
  every output partition's last stable offset (read_committed ListOffsets) and high watermark.
- drain(): after the source stopped, the processors run until the group has committed the end of every
  input partition. final_read(): once every output partition's LSO reached its high watermark, a fresh
  read_committed reader reads every output partition from the beginning to its end (client `final`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.chaos.history import Outcome, Rec
from tests.chaos.txn_history import TxnHistory, TxnOp, died, lso_sample, out_value, tassign, tinput, tpoll
from tests.chaos.workload import classify, rdkafka_debug, records_of

log = logging.getLogger(__name__)

COMMON: dict[str, Any] = {
    # librdkafka 2.x re-bootstraps when every broker is down (the standalone broker killed): the
    # decommissioned broker handle then never finishes terminating, and a transactional request bound to
    # it (send_offsets_to_transaction's TxnOffsetCommit) hangs past its timeout. The brokers come back
    # at the same addresses: no re-bootstrap is needed.
    "metadata.recovery.strategy": "none",
    "topic.metadata.refresh.interval.ms": 1000,
    "reconnect.backoff.max.ms": 500,
    "log_level": 0,
}


class _Thread(threading.Thread):
    def __init__(self, name: str, h: TxnHistory, bootstrap: str) -> None:
        super().__init__(name=name, daemon=True)
        self.client = name
        self.h = h
        self.bootstrap = bootstrap
        self.stop_event = threading.Event()
        self.errors: list[str] = []


class Source(_Thread):
    """Idempotent writer of the input topic."""

    def __init__(self, h: TxnHistory, bootstrap: str, topic: str, partitions: int, rate: float) -> None:
        super().__init__("src", h, bootstrap)
        self.topic, self.partitions, self.interval = topic, partitions, 1.0 / rate
        self.n = 0
        self.last_ack = 0.0

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        try:
            if classify(err) is Outcome.OK:
                now = self.h.now()
                self.last_ack = now
                self.h.add(tinput(self.client, now, msg.partition(), msg.offset(), msg.value().decode()))
        except Exception as e:  # never raise out of a librdkafka callback
            self.errors.append(f"delivery callback: {e!r}")

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 30000, **COMMON})  # fmt: skip
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            if time.monotonic() >= next_at:
                next_at = max(next_at + self.interval, time.monotonic() - 1.0)
                value = f"i-{self.n}"
                try:
                    p.produce(self.topic, value.encode(), partition=self.n % self.partitions,
                              on_delivery=self._delivered)  # fmt: skip
                    self.n += 1
                except BufferError:
                    pass  # local queue full: never sent, never recorded as input
            p.poll(min(0.05, max(0.0, next_at - time.monotonic())))
        p.flush(30)


class Processor(_Thread):
    """consume (read_committed) -> transform -> produce + send_offsets_to_transaction -> commit."""

    def __init__(
        self,
        name: str,
        h: TxnHistory,
        bootstrap: str,
        source: str,
        sink: str,
        group: str,
        *,
        abort_every: int = 10,
        txn_timeout_ms: int = 10000,
        batch: int = 50,
    ) -> None:
        super().__init__(name, h, bootstrap)
        self.source, self.sink, self.group = source, sink, group
        self.abort_every, self.txn_timeout_ms, self.batch = abort_every, txn_timeout_ms, batch
        self.generation = 0  # bumped when it dies: a new transactional id
        self.n_txn = 0
        self.last_commit = 0.0
        self.committed_txns = 0
        self.resets = 0  # _AUTO_OFFSET_RESET errors seen (each followed by a rejoin)
        self.offset_fetch_rejoins = 0  # NOT_COORDINATOR on the committed-offsets fetch (each a rejoin)
        self.consume_errors: dict[int, int] = {}  # error code -> count, of consume()
        self.kill_requested = threading.Event()
        self.graveyard: list[Producer] = []  # producers abandoned mid-transaction (kept alive, unused)
        self._offsets: dict[str, int] = {}  # output value -> acknowledged offset (delivery reports)
        # what a stalled run prints (txn_diag.describe_processors)
        self.stage = "starting"  # the call it is in (or last made)
        self.assignment: list[int] = []
        self.last_batch = (0.0, 0)  # (history time, records) of the last non-empty consume
        self.last_error = ""

    # --- clients ---------------------------------------------------------------------------------
    def _txn_id(self) -> str:
        return f"{self.client}-g{self.generation}"

    def _producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self._txn_id(),
                      "transaction.timeout.ms": self.txn_timeout_ms, "linger.ms": 5,
                      "message.timeout.ms": self.txn_timeout_ms, **COMMON,
                      **rdkafka_debug(self.client)})  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            try:
                self.stage = f"init_transactions({self._txn_id()})"
                p.init_transactions(30)
                return p
            except KafkaException as e:  # coordinator moving: retriable; anything else is a finding
                self.last_error = f"init_transactions: {e.args[0].name()}"
                if not e.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _consumer(self) -> Consumer:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "error", "session.timeout.ms": 10000,
                      "heartbeat.interval.ms": 1000, **COMMON})  # fmt: skip
        c.subscribe([self.source], on_assign=self._on_assign, on_revoke=self._on_revoke)
        return c

    def _on_assign(self, _c: Consumer, parts: list[TopicPartition]) -> None:
        self.assignment = sorted(int(tp.partition) for tp in parts)

    def _on_revoke(self, _c: Consumer, _parts: list[TopicPartition]) -> None:
        self.assignment = []

    def status(self) -> str:
        at, n = self.last_batch
        return (
            f"stage {self.stage}; assigned {self.assignment}; last batch {n} records at {at:.1f} s; "
            f"txns {self.n_txn}, committed {self.committed_txns} (last at {self.last_commit:.1f} s); "
            f"resets {self.resets}; offset-fetch rejoins {self.offset_fetch_rejoins}; consume errors {self.consume_errors}; last error {self.last_error!r}"
        )

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        try:
            if err is None and msg.offset() is not None:
                self._offsets[msg.value().decode()] = int(msg.offset())
        except Exception as e:
            self.errors.append(f"delivery callback: {e!r}")

    # --- loop ------------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            prod, cons = self._producer(), self._consumer()
        except Exception as e:
            self.errors.append(f"start: {e!r}")
            return
        while not self.stop_event.is_set():
            try:
                prod, cons = self._step(prod, cons)
            except Exception as e:  # recorded: a processor that cannot go on is a finding
                self.errors.append(f"processor: {e!r}")
                time.sleep(0.2)
        try:
            cons.close()
        finally:
            prod.flush(10)

    def _step(self, prod: Producer, cons: Consumer) -> tuple[Producer, Consumer]:
        self.stage = "consume"
        got_msgs = cons.consume(num_messages=self.batch, timeout=0.1)
        if any(_code(m) == KafkaError._AUTO_OFFSET_RESET for m in got_msgs):
            self.resets += 1  # the client lost the committed offset (see the module docstring): rejoin
            cons.close()
            return prod, self._consumer()
        if any(_lost_offset_fetch(m) for m in got_msgs):
            self.offset_fetch_rejoins += 1  # librdkafka gave up on the partitions (module docstring)
            self.last_error = f"consume at {self.h.now():.1f} s: NOT_COORDINATOR on the offset fetch: rejoin"
            cons.close()
            return prod, self._consumer()
        for m in got_msgs:
            code = _code(m)
            if code is not None:
                self.consume_errors[code] = self.consume_errors.get(code, 0) + 1
                self.last_error = f"consume at {self.h.now():.1f} s: {m.error()}"  # which call, which broker
        msgs = [m for m in got_msgs if m.error() is None]
        if not msgs:
            return prod, cons
        self.last_batch = (self.h.now(), len(msgs))
        txn = f"{self._txn_id()}-{self.n_txn}"
        self.n_txn += 1
        got = [(int(m.partition() or 0), int(m.offset() or 0), (m.value() or b"").decode()) for m in msgs]
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for p, off, _ in got:
            first.setdefault(p, off)
            last[p] = off
        start = self.h.now()
        values = [(p, out_value(txn, v)) for p, _, v in got]
        try:
            self.stage = f"transaction {txn}"
            prod.begin_transaction()
            for part, value in values:
                prod.produce(self.sink, value.encode(), partition=part, on_delivery=self._delivered)
            ends = [TopicPartition(self.source, p, off + 1) for p, off in last.items()]
            prod.send_offsets_to_transaction(ends, cons.consumer_group_metadata(), 30)
            if self.kill_requested.is_set():
                return self._die(prod, cons, txn, start, values)
            if self.abort_every and self.n_txn % self.abort_every == 0:
                prod.abort_transaction(30)
                self._record(txn, start, Outcome.FAILED, values, "aborted on purpose")
                _seek(cons, self.source, first)
                return prod, cons
            prod.commit_transaction(30)
            prod.poll(0)
            self._record(txn, start, Outcome.OK, values)
            self.last_commit = self.h.now()
            self.committed_txns += 1
            return prod, cons
        except KafkaException as e:
            err = e.args[0]
            self.last_error = f"{txn}: {err.name()}"
            if err.txn_requires_abort():
                try:
                    prod.abort_transaction(30)
                    self._record(txn, start, Outcome.FAILED, values, err.name())
                    _seek(cons, self.source, first)
                    return prod, cons
                except KafkaException as e2:
                    err = e2.args[0]
            self._record(txn, start, Outcome.UNKNOWN, values, err.name())
            if err.fatal() or not err.retriable():
                # fenced or lost: a new producer of the same id fences this one and ends its transaction
                self._close_quietly(prod)
                prod = self._producer()
            cons.close()
            return prod, self._consumer()  # rejoin: start from the group's committed offsets

    def _die(
        self, prod: Producer, cons: Consumer, txn: str, start: float, values: Sequence[tuple[int, str]]
    ) -> tuple[Producer, Consumer]:
        self.kill_requested.clear()
        prod.flush(10)  # the records are in the log, the transaction open, the offsets pending
        self._record(txn, start, Outcome.UNKNOWN, values, "died mid-transaction")
        self.h.add(died(self.client, self.h.now(), sorted({p for p, _ in values}), txn))
        self.graveyard.append(prod)
        cons.close()
        self.generation += 1
        return self._producer(), self._consumer()

    def _record(
        self, txn: str, start: float, outcome: Outcome, values: Sequence[tuple[int, str]], error: str = ""
    ) -> None:
        recs = tuple(Rec(p, self._offsets.pop(v, -1), v) for p, v in values)
        self.h.add(
            TxnOp("txn", self.client, start, self.h.now(), outcome, txn=txn, records=recs, error=error)
        )

    @staticmethod
    def _close_quietly(prod: Producer) -> None:
        with contextlib.suppress(Exception):  # a fenced producer may refuse: it is replaced anyway
            prod.flush(1)


def _lost_offset_fetch(m: Any) -> bool:
    """A consume() error saying the committed-offsets fetch failed with NOT_COORDINATOR."""
    err = m.error()
    return (
        err is not None
        and err.code() == KafkaError.NOT_COORDINATOR
        and "committed offsets" in (err.str() or "")
    )


def _code(m: Any) -> int | None:
    err = m.error()
    return None if err is None else int(err.code())


def _seek(cons: Consumer, topic: str, first: dict[int, int]) -> None:
    for p, off in first.items():
        # revoked meanwhile: its new owner starts from the committed offset
        with contextlib.suppress(KafkaException):
            cons.seek(TopicPartition(topic, p, off))


class Reader(_Thread):
    """A read_committed assign() reader of every output partition from the beginning."""

    def __init__(self, name: str, h: TxnHistory, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(name, h, bootstrap)
        self.topic, self.partitions = topic, partitions

    def run(self) -> None:
        c = _reader(self.bootstrap, f"assign-{self.client}")
        try:
            self.h.add(tassign(self.client, self.h.now()))
            c.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
            while not self.stop_event.is_set():
                _poll(c, self.h, self.client, self.errors)
        finally:
            c.close()


def _reader(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "enable.partition.eof": False, **COMMON})  # fmt: skip


def _poll(c: Consumer, h: TxnHistory, client: str, errors: list[str]) -> list[Rec]:
    start = h.now()
    msgs = c.consume(num_messages=500, timeout=0.2)
    recs = records_of(msgs, errors)
    if recs:
        h.add(tpoll(client, start, h.now(), recs))
    return recs


class LsoMonitor(_Thread):
    """Samples (LSO, high watermark) of every output partition every `interval_s`."""

    def __init__(self, h: TxnHistory, bootstrap: str, topic: str, partitions: int, interval_s: float = 0.25):
        super().__init__("lso-monitor", h, bootstrap)
        self.topic, self.partitions, self.interval_s = topic, partitions, interval_s

    def run(self) -> None:
        committed = _reader(self.bootstrap, "lso-monitor-rc")
        uncommitted = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "lso-monitor-ru",
                                "isolation.level": "read_uncommitted", **COMMON})  # fmt: skip
        try:
            while not self.stop_event.wait(self.interval_s):
                for p in range(self.partitions):
                    tp = TopicPartition(self.topic, p)
                    try:  # the LSO first: a high watermark read after it is never below it
                        lso = committed.get_watermark_offsets(tp, timeout=2, cached=False)[1]
                        hw = uncommitted.get_watermark_offsets(tp, timeout=2, cached=False)[1]
                    except KafkaException:
                        continue  # the partition is moving: no sample, no evidence
                    self.h.add(lso_sample(self.h.now(), p, int(lso), int(hw)))
        finally:
            committed.close()
            uncommitted.close()


class TxnWorkload:
    """Source + processors + readers + LSO monitor over an input and an output topic of `partitions`."""

    def __init__(
        self,
        h: TxnHistory,
        bootstrap: str,
        source: str,
        sink: str,
        partitions: int,
        *,
        processors: int = 2,
        rate: float = 100.0,
        readers: int = 1,
        abort_every: int = 10,
        txn_timeout_ms: int = 10000,
    ) -> None:
        self.h, self.bootstrap, self.source, self.sink, self.partitions = (
            h,
            bootstrap,
            source,
            sink,
            partitions,
        )
        self.txn_timeout_ms = txn_timeout_ms
        self.src = Source(h, bootstrap, source, partitions, rate)
        self.group = group = f"eos-{source}"
        self.processors = [
            Processor(
                f"p{i}",
                h,
                bootstrap,
                source,
                sink,
                group,
                abort_every=abort_every,
                txn_timeout_ms=txn_timeout_ms,
            )
            for i in range(processors)
        ]
        self.readers = [Reader(f"r{i}", h, bootstrap, sink, partitions) for i in range(readers)]
        self.monitor = LsoMonitor(h, bootstrap, sink, partitions)
        self.drained = False

    def threads(self) -> list[_Thread]:
        return [self.src, *self.processors, *self.readers, self.monitor]

    def start(self) -> None:
        """The group's offsets start at 0 (the processors never reset: auto.offset.reset=error)."""
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"eos-{self.source}", **COMMON})
        try:
            c.commit(offsets=[TopicPartition(self.source, p, 0) for p in range(self.partitions)],
                     asynchronous=False)  # fmt: skip
        finally:
            c.close()
        for t in self.threads():
            t.start()

    def committed_since(self, t: float) -> bool:
        """Some processor committed a transaction after `t` (the pipeline moves)."""
        return any(p.last_commit > t for p in self.processors)

    def kill_processor(self, index: int = 0) -> str:
        p = self.processors[index % len(self.processors)]
        p.kill_requested.set()
        return p.client

    def drain(self, timeout_s: float = 120.0) -> bool:
        """Stop the source, then wait until the group committed the end of every input partition."""
        self.src.stop_event.set()
        self.src.join(60)
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"eos-{self.source}",
                      "isolation.level": "read_committed", **COMMON})  # fmt: skip
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                try:
                    tps = [TopicPartition(self.source, p) for p in range(self.partitions)]
                    ends = {
                        p: c.get_watermark_offsets(tp, timeout=5, cached=False)[1] for p, tp in enumerate(tps)
                    }
                    done = c.committed(tps, timeout=5)
                    if all(x.offset >= ends[x.partition] for x in done):
                        self.drained = True
                        return True
                except KafkaException:
                    pass  # coordinator moving, unstable offsets: not yet
                time.sleep(0.2)
            return False
        finally:
            c.close()

    def stop(self, timeout_s: float = 60.0) -> list[str]:
        for t in self.threads():
            t.stop_event.set()
        deadline = time.monotonic() + timeout_s
        for t in self.threads():
            t.join(max(0.1, deadline - time.monotonic()))
        return [f"{t.name} did not stop within {timeout_s}s" for t in self.threads() if t.is_alive()]

    def errors(self) -> list[str]:
        return [f"{t.client}: {e}" for t in self.threads() for e in t.errors]

    def final_read(self, timeout_s: float = 120.0) -> None:
        """Wait until every output partition's LSO reached its high watermark (every transaction ended),
        then read all of it read_committed, recorded as `final`."""
        c = _reader(self.bootstrap, "final-read")
        u = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "final-read-ru",
                      "isolation.level": "read_uncommitted", **COMMON})  # fmt: skip
        deadline = time.monotonic() + timeout_s
        try:
            ends: dict[int, int] = {}
            for p in range(self.partitions):
                tp = TopicPartition(self.sink, p)
                while True:
                    try:
                        lso = c.get_watermark_offsets(tp, timeout=5, cached=False)[1]
                        hw = u.get_watermark_offsets(tp, timeout=5, cached=False)[1]
                        if lso >= hw:
                            ends[p] = int(hw)
                            break
                    except KafkaException:
                        pass
                    if time.monotonic() > deadline:
                        raise AssertionError(f"final read: output partition {p} never became stable")
                    time.sleep(0.2)
            self.h.add(tassign("final", self.h.now()))
            c.assign([TopicPartition(self.sink, p, OFFSET_BEGINNING) for p in range(self.partitions)])
            errors: list[str] = []
            # until the position passed each partition's end (it moves past control records and aborted
            # data too, which no record returns)
            tps = [TopicPartition(self.sink, p) for p in ends]
            while True:
                _poll(c, self.h, "final", errors)
                positions = {tp.partition: tp.offset for tp in c.position(tps)}
                if all(positions[p] >= ends[p] for p in ends):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"final read stuck at {positions} of {ends}; errors {errors[-5:]}")
        finally:
            c.close()
            u.close()
