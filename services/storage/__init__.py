"""The storage node service: partition replicas on local disk, replication, the Storage gRPC API."""
