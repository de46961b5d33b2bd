"""SASL mechanisms the gateway serves (pure code, no I/O): PLAIN (RFC 4616) and
SCRAM-SHA-256/512 (RFC 5802, RFC 7677), with the credential form Kafka stores
(salt, StoredKey, ServerKey, iterations; never a password)."""
