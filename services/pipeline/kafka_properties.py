"""The Java client's property names, as Spark jobs carry them in ``kafka.*`` options,
translated for librdkafka (confluent-kafka).

Most names are shared (``bootstrap.servers``, ``client.id``, ``linger.ms``,
``security.protocol``, ...) and pass through. Those that differ are renamed
(``max.request.size`` -> ``message.max.bytes``, ``fetch.max.wait.ms`` ->
``fetch.wait.max.ms``), rescaled (``buffer.memory`` bytes ->
``queue.buffering.max.kbytes``) or taken apart (``sasl.jaas.config`` ->
``sasl.username``/``sasl.password``, Kerberos keytab and principal, OAuth client
credentials). Java-only settings that librdkafka has no use for (``max.block.ms``,
``ssl.protocol``, ...) are dropped with a note saying why; those whose meaning cannot
be kept (a JKS trust store, a Java partitioner class) fail with the way out.

``acks`` behaves as in the Java producer (Kafka 3.0+, KIP-679): idempotence is on by
default, but ``acks=0``/``1`` without an explicit ``enable.idempotence=true`` switch it
off instead of failing; both together are refused as the Java client refuses them.

Pure code: the callers log the notes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Java name -> librdkafka name, where only the name differs.
_RENAMED_COMMON = {
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "sasl.mechanism": "sasl.mechanisms",
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    "ssl.keystore.key": "ssl.key.pem",
}
_RENAMED_PRODUCER = {"max.request.size": "message.max.bytes"}
_RENAMED_CONSUMER = {"fetch.max.wait.ms": "fetch.wait.max.ms"}

# Java-only settings librdkafka has no counterpart for, and why dropping them is safe.
_DROPPED = {
    "max.block.ms": "librdkafka never blocks a send; the sink waits on a full queue itself",
    "default.api.timeout.ms": "the connector's calls carry their own timeouts",
    "max.poll.records": "records are read in ranges planned by Spark, not by poll()",
    "ssl.protocol": "librdkafka negotiates the highest TLS version OpenSSL offers",
    "ssl.enabled.protocols": "librdkafka negotiates the highest TLS version OpenSSL offers",
    "ssl.keymanager.algorithm": "a JVM security-provider setting",
    "ssl.trustmanager.algorithm": "a JVM security-provider setting",
    "ssl.secure.random.implementation": "a JVM security-provider setting",
    "ssl.truststore.password": "only needed to open a JKS/PKCS12 trust store",
    "sasl.login.class": "a JVM login-module setting",
    "sasl.login.callback.handler.class": "a JVM login-module setting",
    "metric.reporters": "librdkafka reports statistics through statistics.interval.ms",
    "metrics.num.samples": "librdkafka reports statistics through statistics.interval.ms",
    "metrics.sample.window.ms": "librdkafka reports statistics through statistics.interval.ms",
    "metrics.recording.level": "librdkafka reports statistics through statistics.interval.ms",
    "auto.include.jmx.reporter": "there is no JMX outside the JVM",
}

# Java class names that cannot run in librdkafka.
_REFUSED = {
    "partitioner.class": (
        "a Java partitioner cannot run in librdkafka; choose kafka.partitioner (murmur2_random "
        "is the Java default for keyed records) or give each row a 'partition' column"
    ),
    "sasl.client.callback.handler.class": "a Java callback handler cannot run in librdkafka",
}

_JAAS_MODULE = re.compile(
    r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$", re.S
)
_JAAS_OPTION = re.compile(r'([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))')


class PropertyNotes:
    """Why settings were renamed or dropped, for the driver's log."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, text: str) -> None:
        self.lines.append(text)


def parse_jaas(config: str) -> tuple[str, dict[str, str]]:
    """``(login module class, options)`` of a one-module JAAS configuration string."""
    m = _JAAS_MODULE.match(config)
    if m is None:
        raise ValueError(
            "kafka.sasl.jaas.config must look like '<LoginModule class> required key=\"value\" ...;'"
        )
    options = {
        k: (quoted.replace('\\"', '"').replace("\\\\", "\\") if quoted is not None else bare)
        for k, quoted, bare in _JAAS_OPTION.findall(m.group(3))
    }
    return m.group(1), options


def _jaas(config: str, out: dict[str, str]) -> None:
    module, options = parse_jaas(config)
    name = module.rsplit(".", 1)[-1]
    if name in ("PlainLoginModule", "ScramLoginModule"):
        for java, rd in (("username", "sasl.username"), ("password", "sasl.password")):
            if java in options:
                out.setdefault(rd, options[java])
        if name == "PlainLoginModule":
            out.setdefault("sasl.mechanisms", "PLAIN")
    elif name == "Krb5LoginModule":
        if "keyTab" in options:
            out.setdefault("sasl.kerberos.keytab", options["keyTab"])
        if "principal" in options:
            out.setdefault("sasl.kerberos.principal", options["principal"])
        out.setdefault("sasl.mechanisms", "GSSAPI")
    elif name == "OAuthBearerLoginModule":
        # KIP-768's client-credentials flow: librdkafka's built-in OIDC method.
        pairs = (
            ("clientId", "sasl.oauthbearer.client.id"),
            ("clientSecret", "sasl.oauthbearer.client.secret"),
            ("scope", "sasl.oauthbearer.scope"),
        )
        if "clientId" not in options:
            raise ValueError(
                "kafka.sasl.jaas.config: OAuthBearerLoginModule without clientId (unsecured "
                "or custom token callbacks are JVM-only); set kafka.sasl.oauthbearer.* "
                "for librdkafka's OIDC client instead"
            )
        for java, rd in pairs:
            if java in options:
                out.setdefault(rd, options[java])
        out.setdefault("sasl.oauthbearer.method", "oidc")
        out.setdefault("sasl.mechanisms", "OAUTHBEARER")
    else:
        raise ValueError(
            f"kafka.sasl.jaas.config: login module {module} has no librdkafka equivalent"
        )


def _stores(params: Mapping[str, str], out: dict[str, str]) -> None:
    """Java trust/key stores: PEM and PKCS12 map to librdkafka, JKS does not."""
    trust = params.get("ssl.truststore.location")
    if trust:
        kind = params.get("ssl.truststore.type", "JKS").upper()
        if kind != "PEM":
            raise ValueError(
                f"kafka.ssl.truststore.location: librdkafka reads trusted CA certificates as "
                f"PEM, not {kind}; export them with `keytool -exportcert -rfc -keystore "
                f"{trust} -alias <ca>` (or `openssl pkcs12 -nokeys`) and set "
                "kafka.ssl.ca.location to the PEM file"
            )
        out.setdefault("ssl.ca.location", trust)
    keystore = params.get("ssl.keystore.location")
    if keystore:
        kind = params.get("ssl.keystore.type", "JKS").upper()
        if kind == "PKCS12":
            out.setdefault("ssl.keystore.location", keystore)
        elif kind == "PEM":
            out.setdefault("ssl.certificate.location", keystore)
            out.setdefault("ssl.key.location", keystore)
            out.pop("ssl.keystore.password", None)
        else:
            raise ValueError(
                f"kafka.ssl.keystore.location: librdkafka reads key stores as PKCS12 or PEM, not "
                f"{kind}; convert with `keytool -importkeystore -srckeystore {keystore} "
                "-deststoretype PKCS12 -destkeystore client.p12` and set "
                "kafka.ssl.keystore.type=PKCS12"
            )


def _translate(
    params: Mapping[str, str], renamed: Mapping[str, str], notes: PropertyNotes | None
) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in params.items():
        if key in _REFUSED:
            raise ValueError(f"kafka.{key}: {_REFUSED[key]}")
        if key in _DROPPED:
            if notes is not None:
                notes.add(f"kafka.{key} ignored: {_DROPPED[key]}")
            continue
        if key in ("ssl.truststore.location", "ssl.truststore.type", "ssl.keystore.type"):
            continue  # handled with the stores below
        if key == "ssl.keystore.location":
            continue
        if key == "sasl.jaas.config":
            _jaas(value, out)
            continue
        if key == "buffer.memory":
            out["queue.buffering.max.kbytes"] = str(max(1, -(-int(value) // 1024)))
            continue
        if key == "ssl.endpoint.identification.algorithm" and value.strip() == "":
            out[key] = "none"  # Java's empty string switches host name checks off
            continue
        name = renamed.get(key) or _RENAMED_COMMON.get(key) or key
        if name != key and notes is not None:
            notes.add(f"kafka.{key} passed to librdkafka as {name}")
        out[name] = value
    _stores(params, out)
    return out


def translate_consumer(
    params: Mapping[str, str], notes: PropertyNotes | None = None
) -> dict[str, str]:
    return _translate(params, _RENAMED_CONSUMER, notes)


def translate_producer(
    params: Mapping[str, str], notes: PropertyNotes | None = None
) -> dict[str, str]:
    out = _translate(params, _RENAMED_PRODUCER, notes)
    acks = out.get("acks", "all").strip().lower()
    idempotence = out.get("enable.idempotence")
    if acks not in ("all", "-1"):
        if idempotence is not None and idempotence.strip().lower() == "true":
            raise ValueError(
                "Must set kafka.acks to all in order to use the idempotent producer "
                f"(kafka.enable.idempotence=true, kafka.acks={out['acks']})"
            )
        # Java (KIP-679): acks other than all quietly turn the default idempotence off.
        out.setdefault("enable.idempotence", "false")
    return out
