"""The data link: a bytes-only Produce/Fetch path between gateways and storage nodes,
beside gRPC (docs/data-link.md).

:mod:`.frame` is the wire format (sans-io), :mod:`.client` the gateway's side.
"""
