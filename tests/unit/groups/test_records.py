from hypothesis import given, settings
from hypothesis import strategies as st

from kafkad.coordinator.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hash,
    partition_for,
)


def test_offset_key_bytes_match_kafka_layout() -> None:
    raw = encode_offset_key(OffsetKey("g", "t", 3))
    assert raw == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(raw) == OffsetKey("g", "t", 3)
    assert encode_group_key(GroupKey("g")) == b"\x00\x02\x00\x01g"


def test_offset_value_v3_layout_and_v1_read() -> None:
    raw = encode_offset_value(OffsetValue(10, 2, "m", 99))
    assert raw == b"\x00\x03" + (10).to_bytes(8, "big") + (2).to_bytes(4, "big") + b"\x00\x01m" + (
        99
    ).to_bytes(8, "big")
    v1 = b"\x00\x01" + (10).to_bytes(8, "big") + b"\x00\x00" + (5).to_bytes(8, "big") + b"\xff" * 8
    assert decode_offset_value(v1) == OffsetValue(10, -1, "", 5)


def test_java_hash_and_partition() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("console-consumer-12345", 50) == abs(java_string_hash("console-consumer-12345")) % 50


_text = st.text(max_size=20)


@settings(max_examples=100, deadline=None)
@given(
    st.builds(
        GroupValue,
        _text,
        st.integers(-(2**31), 2**31 - 1),
        st.none() | _text,
        st.none() | _text,
        st.integers(-1, 2**62),
        st.lists(
            st.builds(
                MemberValue,
                _text,
                st.none() | _text,
                _text,
                _text,
                st.integers(0, 2**31 - 1),
                st.integers(0, 2**31 - 1),
                st.binary(max_size=30),
                st.binary(max_size=30),
            ),
            max_size=4,
        ).map(tuple),
    )
)
def test_group_value_round_trip(v: GroupValue) -> None:
    assert decode_group_value(encode_group_value(v)) == v
