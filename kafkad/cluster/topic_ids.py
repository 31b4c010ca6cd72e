"""Topic ids (KIP-516) for the handlers: the cluster's (the metadata cache, filled from the topic znodes'
topic_id through UpdateMetadata) in cluster mode, the local partition.metadata files' standalone."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkad.api.broker import Broker

ZERO = uuid.UUID(int=0)


def topic_id(broker: Broker, topic: str) -> uuid.UUID:
    cache = broker.services.get("metadata_cache")
    if cache is not None:
        tid: uuid.UUID = cache.topic_id(topic)
        return tid
    return broker.replicas.topic_id(topic)


def topic_name(broker: Broker, tid: uuid.UUID) -> str | None:
    """The topic with id `tid`, or None (the zero id names no topic)."""
    if tid.int == 0:
        return None
    cache = broker.services.get("metadata_cache")
    if cache is not None:
        name: str | None = cache.topic_by_id(tid)
        return name
    return broker.replicas.topic_by_id(tid)
