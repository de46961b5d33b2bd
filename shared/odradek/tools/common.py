"""What the console tools (``topics``, ``produce``, ``consume``) share.

These tools are ordinary Kafka clients built on kafka-python, never on Odradek's
internals, so they work against any Kafka broker. This module holds the parts
that are the same for all of them: where the cluster is (``--bootstrap-server``,
defaulting to the ``bootstrap_servers`` of ``./data/cluster.json`` that
``odradek up`` writes), Kafka-style ``k=v`` properties, turning client errors into
one-line messages with a non-zero exit code, and the periodic progress line that
long runs print to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

import kafka.errors as kafka_errors

from odradek.config import parse_properties

DEFAULT_BOOTSTRAP_SERVER = "127.0.0.1:9092"
CLUSTER_FILE = Path("data") / "cluster.json"
DEFAULT_CONNECT_TIMEOUT_MS = 10_000
DEFAULT_REPORTING_INTERVAL_MS = 5_000

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


class ToolError(Exception):
    """A failure the user can act on: printed as one line, never as a traceback."""

    # Kafka's tools print argument problems bare and failed operations after a prefix.
    prefixed = True

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class UsageError(ToolError):
    """A bad combination of arguments, printed without the command's prefix."""

    prefixed = False


def default_bootstrap_servers(cluster_file: Path = CLUSTER_FILE, protocol: str = "") -> str:
    """The local cluster's address when ``odradek up`` ran here, else Kafka's usual port.
    With several listeners (``odradek up --listeners``), the one named ``protocol`` (the
    ``security.protocol`` of ``--command-config``) if there is one."""
    try:
        doc = json.loads(cluster_file.read_text())
    except (OSError, ValueError):
        return DEFAULT_BOOTSTRAP_SERVER
    listeners = doc.get("listeners") if isinstance(doc, dict) else None
    if protocol and isinstance(listeners, dict) and isinstance(listeners.get(protocol), str):
        return str(listeners[protocol])
    servers = doc.get("bootstrap_servers") if isinstance(doc, dict) else None
    if isinstance(servers, str) and servers.strip():
        return servers.strip()
    return DEFAULT_BOOTSTRAP_SERVER


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT...]",
        default=None,
        help="the Kafka server(s) to connect to (default: bootstrap_servers of "
        f"./{CLUSTER_FILE} when it exists, else {DEFAULT_BOOTSTRAP_SERVER})",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        type=Path,
        default=None,
        help="Kafka client properties for a secured cluster (security.protocol, "
        "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...), e.g. the "
        "client.properties that odradek up --security writes",
    )
    parser.add_argument(
        "--connect-timeout-ms",
        type=int,
        default=DEFAULT_CONNECT_TIMEOUT_MS,
        metavar="MS",
        help="how long to try reaching the cluster (and finding the topic) before giving "
        f"up (default {DEFAULT_CONNECT_TIMEOUT_MS})",
    )


def add_settings_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """``--set NAME=VALUE`` (repeatable) into ``args.settings``: Kafka-named settings
    for the services a command starts."""
    parser.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="NAME=VALUE", help=help
    )


def bootstrap_servers(args: argparse.Namespace) -> list[str]:
    raw = args.bootstrap_server
    if not raw:
        protocol = command_config(getattr(args, "command_config", None)).get("security_protocol")
        raw = default_bootstrap_servers(protocol=protocol or "")
    servers = [s.strip() for s in raw.split(",") if s.strip()]
    if not servers:
        raise ToolError(f"Invalid --bootstrap-server {raw!r}")
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ToolError(f"Invalid url in bootstrap.servers: {server}")
    return servers


def connection_config(args: argparse.Namespace, client_id: str) -> dict[str, Any]:
    """kafka-python settings every tool's client starts from."""
    timeout_ms = max(1, int(args.connect_timeout_ms))
    return {
        "bootstrap_servers": bootstrap_servers(args),
        "client_id": client_id,
        "bootstrap_timeout_ms": timeout_ms,
        # Back off briefly between reconnects, so a dead server is noticed within the timeout.
        "reconnect_backoff_max_ms": 1000,
        **command_config(getattr(args, "command_config", None)),
    }


_JAAS_VALUE = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def command_config(path: Path | None) -> dict[str, Any]:
    """Java client properties (``--command-config``) as kafka-python settings: the
    security ones are translated (JAAS username/password, PEM trust and key stores)."""
    if path is None:
        return {}
    try:
        props = parse_properties(path.read_text())
    except OSError as exc:
        raise ToolError(f"Cannot read --command-config {path}: {exc}") from None
    out: dict[str, Any] = {}
    if "security.protocol" in props:
        out["security_protocol"] = props["security.protocol"].upper()
    if "sasl.mechanism" in props:
        out["sasl_mechanism"] = props["sasl.mechanism"].upper()
    jaas = dict(_JAAS_VALUE.findall(props.get("sasl.jaas.config", "")))
    if "username" in jaas:
        out["sasl_plain_username"] = jaas["username"]
    if "password" in jaas:
        out["sasl_plain_password"] = jaas["password"]
    if props.get("ssl.truststore.location"):
        out["ssl_cafile"] = props["ssl.truststore.location"]
    if props.get("ssl.keystore.location"):
        # A PEM key store holds key and chain in one file, which ssl accepts for both.
        out["ssl_certfile"] = out["ssl_keyfile"] = props["ssl.keystore.location"]
    if props.get("ssl.key.password"):
        out["ssl_password"] = props["ssl.key.password"]
    return out


def connect(factory: Callable[..., Any], args: argparse.Namespace, config: dict[str, Any]) -> Any:
    """Build a kafka-python client; an unreachable cluster becomes a one-line ToolError."""
    try:
        return factory(**config)
    except kafka_errors.KafkaTimeoutError:
        servers = ",".join(config["bootstrap_servers"])
        raise ToolError(
            f"Could not connect to bootstrap server(s) {servers} "
            f"within {config['bootstrap_timeout_ms']} ms"
        ) from None
    except (kafka_errors.KafkaConfigurationError, ValueError, TypeError, RuntimeError) as exc:
        # kafka-python reports bad settings (and missing codec libraries) this way.
        raise ToolError(f"Invalid client configuration: {exc}") from None


def parse_key_values(items: Iterable[str], option: str) -> dict[str, str]:
    """``k=v`` pairs from a repeatable option (``--property``, ``--config``)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f'Invalid {option} {item!r}: expected the format "key=value".')
        out[key.strip()] = value
    return out


def client_properties(props: dict[str, str]) -> dict[str, Any]:
    """Kafka client property names (``linger.ms=10``) as kafka-python settings (``linger_ms=10``)."""
    out: dict[str, Any] = {}
    for name, raw in props.items():
        value: Any = raw.strip()
        lowered = value.lower()
        if lowered in ("true", "false"):
            value = lowered == "true"
        else:
            try:
                value = int(value)
            except ValueError:
                try:
                    value = float(value)
                except ValueError:
                    pass
        out[name.strip().replace(".", "_").replace("-", "_")] = value
    return out


def error_message(
    error: type[kafka_errors.KafkaError] | kafka_errors.KafkaError, detail: Any
) -> str:
    """A broker error as one line: the broker's own message when it sent one."""
    if isinstance(detail, str) and detail.strip():
        return detail.strip()
    cls = error if isinstance(error, type) else type(error)
    description = getattr(cls, "description", None)
    if description:
        return str(description)
    return cls.__name__


def describe_exception(exc: BaseException) -> str:
    """A client exception as one line, without kafka-python's request dumps."""
    if isinstance(exc, kafka_errors.BrokerResponseError):
        # A message the client wrote itself says more than the error's generic description;
        # the admin client's "Request '...' failed with response '...'" dumps do not.
        own = exc.args[0] if exc.args and isinstance(exc.args[0], str) else None
        if own and "Request '" not in own and len(own) < 500:
            return own.strip()
        return error_message(exc, None)
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return first or type(exc).__name__


def quiet_client_logging() -> None:
    """kafka-python logs retries as warnings; the tools report failures themselves."""
    logger = logging.getLogger("kafka")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    logger.setLevel(logging.CRITICAL)


def interrupt_on_sigterm() -> None:
    """SIGTERM stops a tool the way Ctrl-C does: flush, report, exit."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def run_tool(
    body: Callable[[argparse.Namespace], int], args: argparse.Namespace, prefix: str
) -> int:
    """Run a tool body; every failure becomes ``<prefix><message>`` on stderr and exit code."""
    quiet_client_logging()
    try:
        return body(args)
    except ToolError as exc:
        print(f"{prefix if exc.prefixed else ''}{exc.message}", file=sys.stderr, flush=True)
        return exc.exit_code
    except kafka_errors.KafkaError as exc:
        print(f"{prefix}{describe_exception(exc)}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except OSError as exc:
        print(f"{prefix}{exc}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    except Exception as exc:
        # Anything else is a bug in the tool or the client: still one line, unless asked.
        if os.environ.get("ODRADEK_DEBUG"):
            raise
        print(
            f"{prefix}{type(exc).__name__}: {describe_exception(exc)} "
            "(set ODRADEK_DEBUG=1 for a traceback)",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_ERROR


def mb(nbytes: float) -> float:
    return nbytes / (1024.0 * 1024.0)


class Progress:
    """Counts records and bytes; every ``interval`` seconds prints one rate line.

    A run shorter than one interval prints nothing, so small runs stay quiet.
    ``add`` costs one clock read, cheap next to producing or consuming a batch.
    """

    def __init__(
        self,
        template: str,
        interval_s: float,
        stream: TextIO | None = None,
        enabled: bool = True,
    ) -> None:
        # template gets: total, rate (records/s in the last window), mb_rate (MB/s likewise)
        self.template = template
        self.interval_s = interval_s
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and interval_s > 0
        self.start = time.monotonic()
        self.count = 0
        self.bytes = 0
        self._window_start = self.start
        self._window_count = 0
        self._window_bytes = 0

    def add(self, count: int, nbytes: int) -> None:
        self.count += count
        self.bytes += nbytes
        self._window_count += count
        self._window_bytes += nbytes
        if self.enabled:
            self.tick()

    def tick(self) -> None:
        """Print the window's line if the interval has passed (call it while idle, too)."""
        now = time.monotonic()
        elapsed = now - self._window_start
        if not self.enabled or elapsed < self.interval_s:
            return
        if self._window_count:
            line = self.template.format(
                total=self.count,
                rate=self._window_count / elapsed,
                mb_rate=mb(self._window_bytes) / elapsed,
            )
            print(line, file=self.stream, flush=True)
        self._window_start = now
        self._window_count = 0
        self._window_bytes = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.start
