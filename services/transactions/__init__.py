"""The transaction coordinator (Kafka's ``TransactionCoordinator``): transactional ids
sharded over ``__transaction_state``, their state machine, markers and timeouts."""
