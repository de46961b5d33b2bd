"""The gateway's own settings (Kafka's ``SocketServerConfigs`` names where Kafka has one).

These are the gateway's start-up defaults (``python -m odradek.gateway``); cluster-wide
broker configs it reads (``auto.create.topics.enable``, ...) come from the controller.
"""

from __future__ import annotations

from odradek.config_catalog.definition import Catalog, ConfigDef, ConfigType
from odradek.config_catalog.process import REQUEST_TIMEOUT_MS, process_settings

_INT, _LONG, _STRING = ConfigType.INT, ConfigType.LONG, ConfigType.STRING

GATEWAY_CONFIGS = Catalog(
    "Gateway",
    "The Kafka-protocol front end (`python -m odradek.gateway`).",
    ("gateway",),
    (
        *process_settings(0),
        ConfigDef(
            "listeners",
            _STRING,
            "PLAINTEXT://127.0.0.1:9092",
            "Where Kafka clients connect: NAME://host:port,... (several listeners at once, "
            "each with a distinct name and port; port 0: ephemeral). Each listener has its "
            "own broker ports with its security (listener.security.protocol.map), and "
            "Metadata on it names its endpoints. Any listener setting may be given for one "
            "listener as listener.name.<name lower-case>.<setting> (docs/security.md).",
            note="Kafka's default PLAINTEXT://:9092 listens on every interface; "
            "Odradek's on loopback only.",
        ),
        ConfigDef(
            "advertised.listeners",
            _STRING,
            None,
            "NAME://host:port per listener: the address Metadata gives that listener's "
            "clients (port 0: the bound port; broker ports are advertised at this host "
            "as they are). Names must be among listeners; a listener left out is "
            "advertised at its own address.",
        ),
        ConfigDef(
            "broker.rack",
            _STRING,
            None,
            "Rack shown in Metadata for the storage nodes this gateway fronts when they "
            "have none of their own.",
        ),
        ConfigDef(
            "broker.port.start",
            _INT,
            0,
            "First broker port: storage node N is served on port "
            "broker.port.start + N - storage.node.id.base of the listener's host (and "
            "advertised host). 0: an ephemeral port per storage node, published through "
            "the controller (docs/brokers.md). With several listeners, listener i takes "
            "broker.port.start + i * broker.port.count onwards unless "
            "listener.name.<name>.broker.port.start sets its own.",
            at_least=0,
            at_most=65535,
            kafka=False,
        ),
        ConfigDef(
            "broker.port.count",
            _INT,
            16,
            "How many broker ports a gateway opens from broker.port.start (storage node ids "
            "storage.node.id.base .. +count-1); a storage node outside the range is "
            "advertised at the bootstrap listener. Unused when broker.port.start is 0.",
            at_least=1,
            at_most=4096,
            kafka=False,
        ),
        ConfigDef(
            "storage.node.id.base",
            _INT,
            100,
            "Lowest storage node id, the one broker.port.start serves.",
            at_least=0,
            kafka=False,
        ),
        ConfigDef(
            "socket.request.max.bytes",
            _INT,
            104_857_600,
            "Largest request a client may send; a larger one closes the connection.",
            at_least=1024,
        ),
        ConfigDef(
            "socket.send.buffer.bytes",
            _INT,
            102_400,
            "The SO_SNDBUF of client connections; -1 keeps the OS default (autotuned). "
            "What a client that does not read can make the gateway hold in the kernel, and "
            "how many responses it gets computed before its connection stops being read. A "
            "response larger than it (a consumer's Fetch) grows its connection's buffer to "
            "hold it, up to 4 MiB: its bytes are held until sent either way.",
            at_least=-1,
        ),
        ConfigDef(
            "socket.receive.buffer.bytes",
            _INT,
            102_400,
            "The SO_RCVBUF of the client listeners' sockets; -1 keeps the OS default.",
            at_least=-1,
        ),
        ConfigDef(
            "queued.max.requests",
            _INT,
            500,
            "Requests of one connection in flight before the gateway stops reading it.",
            at_least=1,
        ),
        ConfigDef(
            "connection.max.handled.requests",
            _INT,
            1,
            "Requests of one connection handled at once; later ones wait, in arrival "
            "order, until an earlier one's response is handed to the socket, so a client "
            "pipelining requests it never reads gets no more of the event loop than "
            "another connection. Pipelined Produce requests are the exception: they are "
            "handled together (and coalesced) while no other request is, and free their "
            "place once their records are handed to the storage nodes.",
            at_least=1,
            kafka=False,
            note="Kafka handles one request per connection at a time (the channel is "
            "muted until the response is sent), which the default of 1 matches.",
        ),
        ConfigDef(
            "queued.max.request.bytes",
            _LONG,
            536_870_912,
            "The gateway process's memory budget for client traffic: bytes of requests "
            "being read or handled plus responses not yet sent, over all connections; "
            "while it is used up no connection is read from (a request already being read "
            "is finished).",
            at_least=-1,
            note="Kafka's default is -1 (no limit); every queue here has a bound (-1 "
            "still means none). Kafka counts requests only: a gateway pipelines, so "
            "its unsent responses count too.",
        ),
        ConfigDef(
            "connection.max.queued.request.bytes",
            _LONG,
            268_435_456,
            "Bytes of requests of one connection in flight before the gateway stops reading it.",
            at_least=1024,
            kafka=False,
        ),
        ConfigDef(
            "connections.max.idle.ms",
            _LONG,
            600_000,
            "Idle client connections are closed after this long.",
            at_least=1,
        ),
        ConfigDef(
            "connection.max.queued.response.bytes",
            _LONG,
            134_217_728,
            "Bytes of finished responses one connection may hold unsent (computed but not "
            "yet written, plus the socket's write buffer and the kernel's send queue); past "
            "it the connection is aborted (a client that never reads).",
            at_least=1024,
            kafka=False,
        ),
        ConfigDef(
            "connection.max.unread.response.bytes",
            _LONG,
            16_384,
            "Bytes of responses sent to one connection that its client has not taken yet "
            "(in the socket's write buffer and the kernel's send queue, not acknowledged by "
            "the client's TCP stack); past it the gateway starts none of the connection's "
            "requests and reads none until the client has taken half of it, so a client that never "
            "reads gets this much answered, not socket buffers full of small responses. A "
            "larger response is sent whole; only the requests behind it wait.",
            at_least=1024,
            kafka=False,
            note="Kafka mutes a channel while its response is being written to the socket; "
            "the kernel's send buffer (socket.send.buffer.bytes) still fills with responses "
            "a client never reads.",
        ),
        ConfigDef(
            "connection.request.read.timeout.ms",
            _LONG,
            30_000,
            "Longest time from the first byte of a request to its last; a client trickling "
            "a request slower than this is aborted.",
            at_least=1,
            kafka=False,
        ),
        ConfigDef(
            "connection.write.timeout.ms",
            _LONG,
            60_000,
            "Longest time a connection may have response bytes waiting while its client "
            "reads none of them; then it is aborted.",
            at_least=1,
            kafka=False,
        ),
        ConfigDef(
            "max.connections",
            _INT,
            2147483647,
            "Client connections the gateway keeps open over all its listeners; more are "
            "closed when accepted.",
            at_least=0,
            note="Kafka delays accepting past the limit; Odradek closes the new connection.",
        ),
        ConfigDef(
            "max.connections.per.ip",
            _INT,
            2147483647,
            "Client connections from one address; more are closed when accepted.",
            at_least=0,
        ),
        ConfigDef(
            "max.connection.creation.rate",
            _INT,
            2147483647,
            "New client connections per second the gateway starts reading, over all its "
            "listeners (KIP-612); connections beyond it wait for their turn.",
            at_least=0,
        ),
        ConfigDef(
            "quota.window.num",
            _INT,
            11,
            "The number of samples to retain in memory for client quotas "
            "(producer_byte_rate, consumer_byte_rate, request_percentage; docs/quotas.md).",
            at_least=1,
        ),
        ConfigDef(
            "quota.window.size.seconds",
            _INT,
            1,
            "The time span of each sample for client quotas.",
            at_least=1,
        ),
        ConfigDef(
            "controller.quota.window.num",
            _INT,
            11,
            "The number of samples to retain in memory for controller mutation quotas "
            "(controller_mutation_rate: the token bucket holds this many windows' worth).",
            at_least=1,
        ),
        ConfigDef(
            "controller.quota.window.size.seconds",
            _INT,
            1,
            "The time span of each sample for controller mutations quotas.",
            at_least=1,
        ),
        ConfigDef(
            "max.connections.per.ip.overrides",
            _STRING,
            "",
            "Per-address exceptions to max.connections.per.ip: host:count,host:count.",
        ),
        ConfigDef(
            "listener.security.protocol.map",
            _STRING,
            "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "Listener name to security protocol, NAME:PROTOCOL,... (e.g. "
            "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL); once set it replaces the default, as "
            "in Kafka (docs/security.md).",
        ),
        ConfigDef(
            "sasl.enabled.mechanisms",
            _STRING,
            "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            "SASL mechanisms a SASL listener offers.",
            note="Kafka's default is GSSAPI, which Odradek does not serve; PLAIN checks "
            "passwords against the SCRAM credentials.",
        ),
        ConfigDef(
            "connections.max.reauth.ms",
            _LONG,
            0,
            "How long a SASL session lasts (KIP-368): clients re-authenticate before it "
            "ends (SaslAuthenticate v1+ tells them when); a connection whose session has "
            "ended is closed on its next request. 0: sessions never end.",
            at_least=0,
        ),
        ConfigDef(
            "authentication.timeout.ms",
            _INT,
            10_000,
            "A client must finish its TLS handshake and SASL exchange within this long, "
            "else its connection is closed.",
            at_least=50,
            kafka=False,
        ),
        ConfigDef(
            "ssl.keystore.type",
            _STRING,
            "PEM",
            "Format of the listener's key store: PEM only.",
            note="Kafka's default is JKS; Odradek reads PEM files.",
        ),
        ConfigDef(
            "ssl.keystore.location",
            _STRING,
            None,
            "PEM file with the listener's private key and certificate chain.",
        ),
        ConfigDef(
            "ssl.keystore.certificate.chain",
            _STRING,
            None,
            "The listener's certificate chain, PEM text (or a file path).",
        ),
        ConfigDef(
            "ssl.keystore.key",
            _STRING,
            None,
            "The listener's private key, PEM text (or a file path).",
        ),
        ConfigDef("ssl.key.password", _STRING, None, "Password of an encrypted private key."),
        ConfigDef(
            "ssl.truststore.type",
            _STRING,
            "PEM",
            "Format of the trust store: PEM only.",
            note="Kafka's default is JKS; Odradek reads PEM files.",
        ),
        ConfigDef(
            "ssl.truststore.location",
            _STRING,
            None,
            "PEM file of the CAs whose client certificates are trusted.",
        ),
        ConfigDef("ssl.truststore.certificates", _STRING, None, "Trusted CAs, PEM text."),
        ConfigDef(
            "ssl.keystore.check.interval.ms",
            _INT,
            30_000,
            "How often the gateway checks whether its listeners' PEM files changed (mtime, "
            "size, inode) and reloads them: new connections get the new certificate, open "
            "ones keep theirs. 0: never (AlterConfigs on listener.name.<name>.ssl.* still "
            "reloads, as in Kafka).",
            at_least=0,
            kafka=False,
        ),
        ConfigDef(
            "ssl.client.auth",
            _STRING,
            "none",
            "Client certificates: none, requested or required.",
            one_of=("none", "requested", "required"),
        ),
        ConfigDef(
            "ssl.principal.mapping.rules",
            _STRING,
            "DEFAULT",
            "How a client certificate's subject becomes the principal's name.",
        ),
        ConfigDef(
            "ssl.enabled.protocols",
            _STRING,
            "TLSv1.2,TLSv1.3",
            "TLS versions the listener accepts.",
        ),
        ConfigDef(
            "authorizer.class.name",
            _STRING,
            "",
            "Any value turns the ACL authorizer on (Odradek has one, with "
            "StandardAuthorizer's rules); unset: every request is allowed.",
        ),
        ConfigDef(
            "super.users",
            _STRING,
            None,
            "Principals allowed everything, separated by semicolons (User:admin;User:ops).",
        ),
        ConfigDef(
            "allow.everyone.if.no.acl.found",
            _STRING,
            "false",
            "With the authorizer on: whether a resource no ACL names is open to everyone.",
            one_of=("true", "false"),
        ),
        REQUEST_TIMEOUT_MS,
        ConfigDef(
            "metadata.wait.ms",
            _INT,
            2_000,
            "How long a request waits for metadata the gateway has not seen yet.",
            kafka=False,
        ),
    ),
)
