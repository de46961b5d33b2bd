"""The ``__transaction_state`` topic's record formats (Kafka's TransactionLogKey and
TransactionLogValue) and the transaction states they carry: :mod:`.records`."""
