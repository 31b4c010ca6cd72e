"""What the broker-side handlers of the controller's requests share (LeaderAndIsr, StopReplica,
UpdateMetadata): the cluster-mode check and Kafka's broker-epoch fence (KIP-380).

A request stamped with a broker epoch older than this broker's registration was meant for an earlier
incarnation of this broker and is refused whole with STALE_BROKER_EPOCH; -1 (old versions) is not checked;
a newer epoch passes (the controller may have seen our registration before we learnt our own epoch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkad.protocol import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkad.api.broker import Broker
    from kafkad.replication.metadata_cache import MetadataCache


def cluster_cache(broker: Broker, body: dict[str, Any]) -> MetadataCache:
    """The metadata cache of a cluster-mode broker, after the broker-epoch fence; raises KafkaError."""
    cache: MetadataCache | None = broker.services.get("metadata_cache")
    if cache is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "a standalone broker takes no controller requests")
    epoch = body.get("broker_epoch", -1)
    if epoch != -1 and epoch < cache.broker_epoch:
        raise KafkaError(
            ErrorCode.STALE_BROKER_EPOCH, f"broker epoch {epoch} is older than ours ({cache.broker_epoch})"
        )
    return cache
