"""KIP-392 rack-aware reads: Kafka's RackAwareReplicaSelector.

With replica.selector.class set to it, a leader asked by a consumer that sent its client.rack (Fetch v11
rack_id) answers, instead of records, the in-sync replica in that rack with the most data (the largest log
end offset the leader knows), unless the leader itself is in that rack or no in-sync replica is; the
consumer then fetches from that follower, which serves it up to its own high watermark.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkad.replication.partition import Partition

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
NO_PREFERENCE = -1


def rack_aware(selector_class: str | None) -> bool:
    """Whether replica.selector.class names Kafka's rack-aware selector (by its simple name too)."""
    return bool(selector_class) and selector_class.rsplit(".", 1)[-1] == "RackAwareReplicaSelector"  # type: ignore[union-attr]


def preferred_read_replica(
    part: Partition, client_rack: str, own_rack: str | None, rack_of: Callable[[int], str | None]
) -> int:
    """The replica a consumer in `client_rack` should read `part` from; NO_PREFERENCE = here."""
    if not part.is_leader or own_rack == client_rack:
        return NO_PREFERENCE
    best, best_leo = NO_PREFERENCE, -1
    for r in part.isr:
        if r != part.broker_id and rack_of(r) == client_rack:
            leo = part.follower_leo(r)
            if leo > best_leo:
                best, best_leo = r, leo
    return best
