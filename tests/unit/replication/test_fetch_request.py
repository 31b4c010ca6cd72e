"""FetchTemplate: the patched frame is byte for byte what the schema codec encodes (hypothesis over offsets
and partition sets), and the channel's correlation id goes where the codec puts it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkad.protocol import ApiKey, RequestHeader, decode_request, encode_request
from kafkad.replication.fetch_request import FETCH_VERSION, FetchTemplate, fetch_body
from kafkad.replication.fetcher import FetcherConfig

CFG = FetcherConfig(broker_id=3, rack="r1")
offsets = st.integers(min_value=0, max_value=2**63 - 1)
keys = st.lists(
    st.tuples(
        st.sampled_from(["a", "topic-b", "__consumer_offsets"]), st.integers(0, 99), st.integers(-1, 50)
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda k: (k[0], k[1]),
)


@given(keys, st.data())
def test_patched_frame_equals_the_codec(ks: list[tuple[str, int, int]], data: st.DataObject) -> None:
    template = FetchTemplate(CFG, "replica-fetcher-3-1", ks)
    assert template.ok
    values = [(data.draw(offsets), data.draw(offsets)) for _ in ks]
    got = template.frame(values)
    body = fetch_body(CFG, [(k, o, s) for k, (o, s) in zip(ks, values, strict=True)])
    want = encode_request(RequestHeader(ApiKey.FETCH, FETCH_VERSION, 0, "replica-fetcher-3-1"), body)
    assert bytes(got) == want
    got[8:12] = (77).to_bytes(4, "big")  # where BrokerChannel.request_frame writes the correlation id
    assert decode_request(bytearray(got[4:])).header.correlation_id == 77
