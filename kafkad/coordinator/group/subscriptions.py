"""The topics a consumer group's members subscribe to, read from their JoinGroup protocol metadata.

The "consumer" protocol's Subscription (every version) starts with an int16 version and an array of topic
names (int32 count, int16-length strings); the rest (user data, owned partitions, rack) is not needed here.
Like Kafka's GroupMetadata.subscribedTopics, a member whose metadata does not parse makes the answer
unknown (None), and callers then assume every topic is subscribed.
"""

from __future__ import annotations

import struct

from kafkad.coordinator.group.group import Group

CONSUMER_PROTOCOL_TYPE = "consumer"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def parse_subscription_topics(metadata: bytes) -> list[str]:
    """The topic names of a consumer Subscription; raises ValueError on malformed bytes."""
    try:
        pos = _I16.size  # version
        (count,) = _I32.unpack_from(metadata, pos)
        pos += _I32.size
        if count < 0 or count > len(metadata):
            raise ValueError(f"bad topic count {count}")
        topics = []
        for _ in range(count):
            (n,) = _I16.unpack_from(metadata, pos)
            pos += _I16.size
            if n < 0 or pos + n > len(metadata):
                raise ValueError("truncated topic name")
            topics.append(metadata[pos : pos + n].decode())
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError) as e:
        raise ValueError(f"malformed consumer subscription: {e}") from None


def subscribed_topics(group: Group) -> set[str] | None:
    """Every topic some member of a consumer group subscribes to, or None when that cannot be told."""
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE or group.protocol_name is None:
        return None
    out: set[str] = set()
    for member in group.members.values():
        try:
            out.update(parse_subscription_topics(member.metadata(group.protocol_name)))
        except ValueError:
            return None
    return out
