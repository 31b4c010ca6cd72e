"""Real confluent-kafka clients that record every operation into a History (history.py).

- Writers: idempotent producers with acks=all, each value unique (`<writer>-<n>`), written round-robin to
  explicit partitions at a fixed rate. A delivery report without error is `ok` with its offset; errors
  that prove the record was never written are `failed`; everything else (timeouts, lost connections,
  in-flight purges) is `unknown`. A fatal idempotence error replaces the producer (and is recorded).
- Readers: assign() readers from the beginning of every partition, and group consumers (subscribe, auto
  commit) whose rebalances are recorded as `assign` ops before the poll that returned after them.
- final_read(): after the faults are healed and the writers stopped, a fresh assign() reader reads every
  partition from the beginning to its high watermark, so every acknowledged offset is covered.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.chaos.history import History, Op, Outcome, Rec, assign

log = logging.getLogger(__name__)

# Errors after which the record was certainly not appended (no attempt reached a leader's log).
DEFINITELY_NOT_WRITTEN = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError._INVALID_ARG,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._PURGE_QUEUE,
    }
)


def classify(err: KafkaError | None) -> Outcome:
    if err is None:
        return Outcome.OK
    return Outcome.FAILED if err.code() in DEFINITELY_NOT_WRITTEN else Outcome.UNKNOWN


def _offset(msg: Any) -> int:
    off = msg.offset()
    return int(off) if off is not None else -1  # acknowledged with an unknown offset: -1


def rdkafka_debug(client: str) -> dict[str, Any]:
    """librdkafka debug settings for one client, or none: CHAOS_RDKAFKA_DEBUG (e.g. "eos,msg" for the
    writers, "cgrp,fetch" for the readers: each client ignores contexts that are not its own) writes each
    client's librdkafka log to rdkafka-<client>.log in CHAOS_RDKAFKA_LOGDIR (default: the current dir)."""
    debug = os.environ.get("CHAOS_RDKAFKA_DEBUG")
    if not debug:
        return {}
    lg = logging.getLogger(f"chaos.rdkafka.{client}")
    lg.propagate = False
    lg.setLevel(logging.DEBUG)
    if not lg.handlers:
        out = os.environ.get("CHAOS_RDKAFKA_LOGDIR", ".")
        fmt = logging.Formatter("%(asctime)s %(message)s")
        fh = logging.FileHandler(os.path.join(out, f"rdkafka-{client}.log"))
        fh.setFormatter(fmt)
        lg.addHandler(fh)
    return {"debug": debug, "logger": lg, "log_level": 7}


class _ClientThread(threading.Thread):
    """One recorded client on its own thread; stop_event ends its loop."""

    def __init__(
        self, kind: str, name: str, history: History, bootstrap: str, topic: str, partitions: int
    ) -> None:
        super().__init__(name=f"{kind}-{name}", daemon=True)
        self.client = name
        self.h = history
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.stop_event = threading.Event()
        self.errors: list[str] = []


class Writer(_ClientThread):
    def __init__(
        self, name: str, history: History, bootstrap: str, topic: str, partitions: int, rate: float
    ) -> None:
        super().__init__("writer", name, history, bootstrap, topic, partitions)
        self.interval = 1.0 / rate
        self.n = 0
        self.last_ack: dict[int, float] = {}  # partition -> time of its latest acknowledgement
        self._fatal = False
        self._pending: dict[str, tuple[float, int]] = {}

    def _producer(self) -> Producer:
        extra = rdkafka_debug(self.client)
        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 20000,
                "request.timeout.ms": 5000,
                "retry.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
                "log_level": 0,
                **extra,
            }
        )

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        # Never raise out of a librdkafka callback: confluent-kafka then fails the next poll() with a
        # SystemError (confluent-kafka-python#865); a broken callback is recorded instead.
        try:
            self._delivered(err, msg)
        except Exception as e:
            self.errors.append(f"delivery callback: {e!r}")

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        value = msg.value().decode()
        start, p = self._pending.pop(value, (self.h.now(), -1))
        outcome = classify(err)
        if err is not None and err.fatal():
            self._fatal = True
        if outcome is Outcome.OK:
            self.last_ack[p] = self.h.now()
        self.h.add(
            Op(
                "send",
                self.client,
                start,
                self.h.now(),
                outcome,
                partition=p,
                offset=_offset(msg) if outcome is Outcome.OK else -1,
                value=value,
                error="" if err is None else err.name(),
            )
        )

    def run(self) -> None:
        prod = self._producer()
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            now = time.monotonic()
            try:
                if now >= next_at:
                    next_at = max(next_at + self.interval, now - 1.0)
                    self._send(prod)
                prod.poll(min(0.05, max(0.0, next_at - time.monotonic())))
            except Exception as e:  # recorded; the run is then invalid, the thread keeps writing
                self.errors.append(f"producer: {e!r}")
                if isinstance(e, KafkaException) and e.args and e.args[0].fatal():
                    self._fatal = True  # produce() itself refuses after a fatal error: replace it too
                time.sleep(0.1)
            if self._fatal:
                self.errors.append("fatal producer error: producer replaced")
                self._close(prod, 5.0)
                prod = self._producer()
                self._fatal = False
        self._close(prod, 10.0)

    def _send(self, prod: Producer) -> None:
        value = f"{self.client}-{self.n}"
        p = self.n % self.partitions
        self.n += 1
        start = self.h.now()
        self._pending[value] = (start, p)
        try:
            prod.produce(self.topic, value.encode(), partition=p, on_delivery=self._on_delivery)
        except BufferError as e:  # local queue full: never sent
            del self._pending[value]
            self.h.add(
                Op("send", self.client, start, self.h.now(), Outcome.FAILED, p, -1, value, error=str(e))
            )

    def _close(self, prod: Producer, timeout_s: float) -> None:
        prod.flush(timeout_s)
        for value, (start, p) in list(self._pending.items()):  # never reported: may or may not be written
            self.h.add(
                Op(
                    "send",
                    self.client,
                    start,
                    self.h.now(),
                    Outcome.UNKNOWN,
                    p,
                    -1,
                    value,
                    error="unreported",
                )
            )
        self._pending.clear()


class Reader(_ClientThread):
    """An assign() reader of every partition from the beginning, or (group=...) a group consumer."""

    def __init__(
        self,
        name: str,
        history: History,
        bootstrap: str,
        topic: str,
        partitions: int,
        group: str | None = None,
    ) -> None:
        super().__init__("reader", name, history, bootstrap, topic, partitions)
        self.group = group
        self._assigned = False

    def consumer(self) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group or f"assign-{self.client}",
                "enable.auto.commit": self.group is not None,
                "auto.commit.interval.ms": 1000,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
                "topic.metadata.refresh.interval.ms": 1000,
                "reconnect.backoff.max.ms": 500,
                "log_level": 0,
                **rdkafka_debug(self.client),
            }
        )

    def _on_assign(self, consumer: Consumer, parts: Sequence[TopicPartition]) -> None:
        self._assigned = True

    def run(self) -> None:
        c = self.consumer()
        try:
            if self.group is None:
                self.h.add(assign(self.client, self.h.now()))
                c.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
            else:
                c.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_assign)
            while not self.stop_event.is_set():
                try:
                    poll_once(c, self.h, self.client, self.errors, lambda: self._take_assigned())
                except Exception as e:  # recorded (the run is then invalid); keep reading
                    self.errors.append(f"consumer: {e!r}")
                    time.sleep(0.1)
        finally:
            c.close()

    def _take_assigned(self) -> bool:
        was, self._assigned = self._assigned, False
        return was


def poll_once(
    c: Consumer, h: History, client: str, errors: list[str], assigned: Callable[[], bool] = lambda: False
) -> list[Rec]:
    start = h.now()
    msgs = c.consume(num_messages=500, timeout=0.2)
    end = h.now()
    if assigned():  # a rebalance was served inside this consume(): the records come after it
        h.add(assign(client, start - 1e-6))
    recs = records_of(msgs, errors)
    if recs:
        h.add(Op("poll", client, start, end, Outcome.OK, records=tuple(recs)))
    return recs


def records_of(msgs: list[Any], errors: list[str]) -> list[Rec]:
    """The records of one consume(); an error's name goes to `errors` (an end-of-partition event is none).
    A damaged value is decoded with replacement: it must reach the checker ("corrupt"), not fail here."""
    recs = []
    for m in msgs:
        err = m.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                errors.append(err.name())
            continue
        value = m.value()
        recs.append(
            Rec(
                int(m.partition() or 0), int(m.offset() or 0), value.decode(errors="replace") if value else ""
            )
        )
    return recs


def create_topic(
    bootstrap: str, topic: str, partitions: int, replication_factor: int, config: dict[str, str] | None = None
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    nt = NewTopic(topic, partitions, replication_factor, config=config or {})
    for fut in admin.create_topics([nt], operation_timeout=30, request_timeout=60).values():
        fut.result(timeout=90)


def final_read(
    history: History, bootstrap: str, topic: str, partitions: int, timeout_s: float = 120.0
) -> None:
    """Read every partition from the beginning up to its current high watermark (recorded as `final`)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "final-read",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )
    try:
        deadline = time.monotonic() + timeout_s
        ends: dict[int, int] = {}
        for p in range(partitions):
            while True:
                try:
                    _, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
                    ends[p] = int(hi)
                    break
                except Exception as e:  # KafkaException while a leader is still moving
                    if time.monotonic() > deadline:
                        raise AssertionError(f"final read: no high watermark for partition {p}: {e}") from e
        history.add(assign("final", history.now()))
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        pos = {p: -1 for p in range(partitions)}
        errors: list[str] = []
        while any(pos[p] + 1 < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise AssertionError(f"final read stuck at {pos} of {ends}; errors {errors[-5:]}")
            for r in poll_once(c, history, "final", errors):
                pos[r.partition] = max(pos[r.partition], r.offset)
    finally:
        c.close()


class Workload:
    """Writers + readers on one topic; start(), stop() (writers flush), then final_read()."""

    def __init__(
        self,
        history: History,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        writers: int = 2,
        rate: float = 50.0,
        assign_readers: int = 1,
        group_consumers: int = 1,
    ) -> None:
        self.h = history
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.writers = [Writer(f"w{i}", history, bootstrap, topic, partitions, rate) for i in range(writers)]
        self.readers = [Reader(f"r{i}", history, bootstrap, topic, partitions) for i in range(assign_readers)]
        self.readers += [
            Reader(f"g{i}", history, bootstrap, topic, partitions, group=f"chaos-{topic}")
            for i in range(group_consumers)
        ]

    def start(self) -> None:
        for t in [*self.writers, *self.readers]:
            t.start()

    def acked_since(self, t: float) -> set[int]:
        """Partitions that EVERY writer had acknowledged after `t` (a stuck client is unavailability too:
        one producer can hang while another one's writes succeed)."""
        got = [{p for p, at in list(w.last_ack.items()) if at > t} for w in self.writers]
        return set.intersection(*got) if got else set()

    def stuck_writers(self, t: float) -> list[str]:
        return [w.client for w in self.writers if not any(at > t for at in list(w.last_ack.values()))]

    def stop(self, timeout_s: float = 60.0) -> list[str]:
        """Stop every client; returns the names of those that did not stop in time (daemon threads)."""
        threads: list[_ClientThread] = [*self.writers, *self.readers]
        for t in threads:
            t.stop_event.set()
        deadline = time.monotonic() + timeout_s
        for t in threads:
            t.join(max(0.1, deadline - time.monotonic()))
        return [f"{t.name} did not stop within {timeout_s}s" for t in threads if t.is_alive()]

    def final_read(self, timeout_s: float = 120.0) -> None:
        final_read(self.h, self.bootstrap, self.topic, self.partitions, timeout_s)
