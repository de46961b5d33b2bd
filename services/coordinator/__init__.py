"""The group coordinator service: classic consumer-group membership, sharded by
``__consumer_offsets`` partition (``python -m odradek.coordinator``)."""
