"""The offset store service: committed offsets and group metadata, durable in
``__consumer_offsets`` and cached per shard (``python -m odradek.offsets``)."""
