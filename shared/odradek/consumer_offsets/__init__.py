"""The ``__consumer_offsets`` topic as every service sees it (Kafka's GroupCoordinator
record formats): :mod:`.records` holds the key and value layouts, :mod:`.group_proto`
converts group metadata to and from the protobuf the coordinator and the offset store
exchange. Pure code, no I/O."""
