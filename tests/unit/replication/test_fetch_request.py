"""FetchEncoder: its frame is byte for byte what the schema codec encodes (hypothesis over offsets, partition
sets and orders, a topic's partitions split or not), and the channel's correlation id goes where the codec
puts it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkad.protocol import ApiKey, RequestHeader, decode_request, encode_request
from kafkad.replication.fetch_request import FETCH_VERSION, FetchEncoder, fetch_body
from kafkad.replication.fetcher import FetcherConfig

CFG = FetcherConfig(broker_id=3, rack="r1")
offsets = st.integers(min_value=0, max_value=2**63 - 1)
keys = st.lists(
    st.tuples(
        st.sampled_from(["a", "topic-b", "__consumer_offsets"]), st.integers(0, 99), st.integers(-1, 50)
    ),
    min_size=0,
    max_size=8,
    unique_by=lambda k: (k[0], k[1]),
)


@given(keys, st.data(), st.sampled_from(["", "rack-2"]))
def test_frame_equals_the_codec(ks: list[tuple[str, int, int]], data: st.DataObject, rack: str) -> None:
    cfg = CFG._replace(rack=rack)
    encoder = FetchEncoder(cfg, "replica-fetcher-3-1")
    assert encoder.ok
    wanted = [(t, i, e, data.draw(offsets), data.draw(offsets)) for t, i, e in ks]
    got = encoder.frame(wanted)
    want = encode_request(
        RequestHeader(ApiKey.FETCH, FETCH_VERSION, 0, "replica-fetcher-3-1"), fetch_body(cfg, wanted)
    )
    assert bytes(got) == want
    got[8:12] = (77).to_bytes(4, "big")  # where BrokerChannel.request_raw writes the correlation id
    request = decode_request(bytearray(got[4:]))
    assert request.header.correlation_id == 77
    order = [(t["topic"], p["partition"]) for t in request.body["topics"] for p in t["partitions"]]
    assert order == [(w[0], w[1]) for w in wanted]
