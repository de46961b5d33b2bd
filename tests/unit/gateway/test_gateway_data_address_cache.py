"""A storage node's data link address is read from the snapshot's protobuf once per
snapshot (``Snapshot.data_address``): the gateway asks twice per storage call (its
StoragePool, then the DataLinkPool checking its open connection), and building it from
the node's fields took 1.5-2.5 us each time (issue 18). The answers stay those of the
snapshot: a new snapshot with the node moved gives the new address."""

from __future__ import annotations

from odradek.metadata_cache import Snapshot
from odradek.rpc.v1 import common_pb2


def _snapshot(data_port: int) -> Snapshot:
    return Snapshot.build(
        common_pb2.ClusterMetadata(
            version=1,
            nodes=[
                common_pb2.Node(
                    node_id=100, kind=common_pb2.STORAGE, host="127.0.0.1", data_port=data_port
                ),
                common_pb2.Node(node_id=101, kind=common_pb2.STORAGE, host="127.0.0.2"),
            ],
        )
    )


def test_data_address_is_built_once_per_snapshot() -> None:
    snap = _snapshot(9100)
    first = snap.data_address(100)
    assert first == ("127.0.0.1", 9100)
    assert snap.data_address(100) is first  # not rebuilt from the protobuf per call
    assert snap.data_address(101) is None  # gRPC only
    assert snap.data_address(101) is None
    assert snap.data_address(7) is None  # unknown
    assert 7 not in snap._data_addresses  # unknown ids are not kept (bounded)
    assert _snapshot(9200).data_address(100) == ("127.0.0.1", 9200)
    assert snap.data_address(100) == ("127.0.0.1", 9100)
