"""A source's internal name (nats-server's composeIName), the first three fields of the
`Nats-Stream-Source` header: the hash of an external API prefix is the one recorded from
nats-server 2.15.1 (shared/reference/leafnode-and-mirrors-notes.md §2.3)."""

from __future__ import annotations

from brook.jetstream.models.sources import (
    ConsumerSource,
    ExternalStream,
    StreamSource,
    go_hash,
)
from brook.jetstream.models.transforms import SubjectTransformConfig as T


def test_recorded_hash_of_an_external_api_prefix() -> None:
    assert go_hash("$JS.brook.API") == "29G81iIe"
    ext = ExternalStream("$JS.brook.API", "deliver.brook")
    assert StreamSource("ORDERS", external=ext).iname == "ORDERS:29G81iIe > >"


def test_filters_and_transforms_in_the_name() -> None:
    assert StreamSource("O").iname == "O > >"
    assert StreamSource("O", filter_subject="o.a").iname == "O o.a >"
    transforms = (T("o.*", "m.$1"), T("", ""))
    assert StreamSource("O", subject_transforms=transforms).iname == "O o.*\f> m.$1\f>"


def test_a_durable_consumer_in_the_name() -> None:
    source = StreamSource("O", consumer=ConsumerSource("c", "d"))
    assert source.iname == f"O:C={go_hash('c')} > >"
