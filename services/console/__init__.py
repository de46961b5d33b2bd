"""``odradek.console``: a web console to see and operate the cluster in a browser.

Overview (services, nodes, partitions needing attention, live traffic charts), topics
(list, search, partitions, configs, create, delete), messages (browse and produce) and
consumer groups (members, offsets, lag, reset). Cluster access is over the Kafka
protocol through the gateway (:mod:`odradek.kafka_client`); service health,
roles and versions come from the controller's metadata and each service's /metrics.
See docs/console.md.
"""
