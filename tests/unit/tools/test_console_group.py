"""The console consumer's group member: consumer-protocol codecs and the range assignor."""

from __future__ import annotations

from kafka.protocol.old.consumer_protocol import (
    ConsumerProtocolMemberAssignment_v0,
    ConsumerProtocolMemberMetadata_v0,
)

from kafkad.tools.group_member import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)


def test_subscription_matches_kafka_python_encoding() -> None:
    ours = encode_subscription(["a", "bb"])
    theirs = ConsumerProtocolMemberMetadata_v0(0, ["a", "bb"], b"").encode()
    assert decode_subscription(ours) == ["a", "bb"]
    assert decode_subscription(theirs) == ["a", "bb"]
    assert ours[:-4] == theirs[:-4]  # user data: ours null (-1), kafka-python's empty (0)


def test_assignment_round_trip_and_kafka_python_decode() -> None:
    data = encode_assignment({"t": [0, 2], "u": []})
    assert decode_assignment(data) == {"t": [0, 2], "u": []}
    decoded = ConsumerProtocolMemberAssignment_v0.decode(data)
    assert [(t, list(ps)) for t, ps in decoded.assigned_partitions] == [("t", [0, 2]), ("u", [])]
    assert decode_assignment(b"") == {}


def test_range_assign_like_kafkas_range_assignor() -> None:
    plan = range_assign({"m2": ["t"], "m1": ["t", "u"], "m3": ["t"]}, {"t": 7, "u": 2})
    assert plan == {"m1": {"t": [0, 1, 2], "u": [0, 1]}, "m2": {"t": [3, 4]}, "m3": {"t": [5, 6]}}
