"""What the broker-side handlers of the controller's requests share (LeaderAndIsr, StopReplica,
UpdateMetadata): the control plane's metadata cache, behind Kafka's broker-epoch fence (KIP-380; a
standalone broker takes none: INVALID_REQUEST).

A request stamped with a broker epoch older than this broker's registration was meant for an earlier
incarnation of this broker and is refused whole with STALE_BROKER_EPOCH; -1 (old versions) is not checked;
a newer epoch passes (the controller may have seen our registration before we learnt our own epoch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkad.api.broker import Broker
    from kafkad.replication.metadata_cache import MetadataCache


def cluster_cache(broker: Broker, body: dict[str, Any]) -> MetadataCache:
    """The metadata cache of a cluster-mode broker, after the broker-epoch fence; raises KafkaError."""
    return broker.control_plane.controller_cache(body)
