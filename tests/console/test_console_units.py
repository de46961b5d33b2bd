"""The console's pure parts: value rendering, metric parsing and rates, form parsing,
record decoding, lag arithmetic, and how ``odradek up`` and ``odradek console`` start it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from odradek.console.groups import GroupRow, OffsetRow
from odradek.console.log_sizes import log_dir_of
from odradek.console.messages import BrowseRequest, Message, decode_records
from odradek.console.render import as_hex, human_bytes, parse_headers, render
from odradek.console.sampler import RateTracker, parse_metrics
from odradek.console.web import _config_lines, _parse_time
from odradek.records.record import BatchBuilder
from odradek.tools import console as console_tool
from odradek.tools.launcher import STOP_ORDER, ClusterOptions, plan


def test_render_formats() -> None:
    assert render(None, "auto") == ("null", "null")
    assert render(b'{"a":1}', "auto") == ('{\n  "a": 1\n}', "json")
    assert render(b'{"a":1}', "text") == ('{"a":1}', "text")
    assert render(b"plain words", "json") == ("plain words", "text (not JSON)")
    shown, used = render(b"\x00\x01binary", "auto")
    assert used == "hex" and shown.startswith("00000000  00 01 62")
    assert render("héllo".encode(), "auto") == ("héllo", "text")
    assert as_hex(b"A" * 17).splitlines()[1].startswith("00000010  41")
    big, _ = render(b"x" * 70_000, "text")
    assert big.endswith("more bytes)") and len(big) < 70_000


def test_headers_and_configs_from_forms() -> None:
    assert parse_headers("trace=abc\n\n  source: web ") == [("trace", b"abc"), ("source", b"web")]
    with pytest.raises(ValueError, match="expected name=value"):
        parse_headers("no separator")
    assert _config_lines("retention.ms=1000\ncleanup.policy = compact\n") == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
    }
    with pytest.raises(ValueError, match="expected name=value"):
        _config_lines("retention.ms")


def test_times_are_epoch_ms_or_iso() -> None:
    assert _parse_time("") is None
    assert _parse_time("1700000000000") == 1_700_000_000_000
    assert _parse_time("2024-01-31T12:00:00Z") == 1_706_702_400_000
    assert _parse_time("2024-01-31T12:00:00") == 1_706_702_400_000  # UTC when unsaid
    assert _parse_time("2024-01-31T13:00:00+01:00") == 1_706_702_400_000
    with pytest.raises(ValueError, match="Invalid timestamp"):
        _parse_time("yesterday")


def test_metrics_parsing_and_rates() -> None:
    text = "\n".join(
        [
            "# HELP odradek_storage_bytes_in_total x",
            'odradek_storage_bytes_in_total{topic="orders"} 1024.0',
            'odradek_storage_bytes_in_created{topic="orders"} 1.7e9',
            'odradek_gateway_requests_total{request="Fetch",version="12"} 7.0',
            'odradek_build_info{version="0.1.0"} 1.0',
            "process_cpu_seconds_total 3.0",
        ]
    )
    samples = parse_metrics(text)
    assert samples == [
        ("odradek_storage_bytes_in_total", {"topic": "orders"}, 1024.0),
        ("odradek_gateway_requests_total", {"request": "Fetch", "version": "12"}, 7.0),
        ("odradek_build_info", {"version": "0.1.0"}, 1.0),
    ]
    rates = RateTracker()
    assert rates.rate("k", 10.0, 100.0) is None  # first sample: no rate yet
    assert rates.rate("k", 12.0, 300.0) == 100.0
    assert rates.rate("k", 13.0, 50.0) is None  # a restarted process reset its counter
    assert rates.rate("k", 14.0, 150.0) == 100.0


def test_log_dir_of_partition_directories() -> None:
    assert log_dir_of("/data/storage-100/orders-3", "orders", 3) == "/data/storage-100"
    assert log_dir_of("/data/storage-100/orders-3/", "orders", 3) == "/data/storage-100"
    assert log_dir_of("/data/elsewhere", "orders", 3) == "/data/elsewhere"
    assert human_bytes(None) == "\u2013" and human_bytes(512) == "512 B"
    assert human_bytes(3 * 1024 * 1024) == "3.0 MiB"


def test_decode_records_skips_below_offset() -> None:
    builder = BatchBuilder(base_offset=10)
    for i in range(3):
        builder.append(1000 + i, f"k{i}".encode(), f"v{i}".encode(), [("h", b"x")])
    batch = builder.build()
    records = decode_records(batch, 11)
    assert [(m.offset, m.key, m.value) for m in records] == [(11, b"k1", b"v1"), (12, b"k2", b"v2")]
    assert records[0].headers == [("h", b"x")] and records[0].timestamp == 1001
    assert decode_records(batch[:-5], 0) == []  # a cut-off trailing batch is skipped


def test_browse_filters() -> None:
    m = Message(1, 0, b"user-1", b'{"order": 9}')
    assert BrowseRequest(key="user-1").matches(m)
    assert not BrowseRequest(key="user-2").matches(m)
    assert BrowseRequest(contains="order").matches(m)
    assert BrowseRequest(contains="user").matches(m)
    assert not BrowseRequest(key="user-1", contains="nope").matches(m)
    assert BrowseRequest(contains="v").matches(Message(2, 0, None, b"v"))  # null key


def test_lag_is_log_end_minus_committed() -> None:
    group = GroupRow(
        "g",
        offsets=[
            OffsetRow("t", 0, 5, 20),
            OffsetRow("t", 1, None, 20),  # assigned, nothing committed: no lag shown
            OffsetRow("t", 2, 30, 20),  # committed past the end (truncation): lag 0
        ],
    )
    assert [o.lag for o in group.offsets] == [15, None, 0]
    assert group.lag == 15
    assert GroupRow("empty").lag is None


def test_odradek_up_starts_the_console(tmp_path: Path) -> None:
    specs = plan(ClusterOptions(data_dir=tmp_path, port=9092))
    console = next(s for s in specs if s.kind == "console")
    assert console.settings["console.listener"] == "127.0.0.1:8080"
    assert specs[-1] is console, "started after the services it looks at"
    assert STOP_ORDER[0] == "console", "stopped first"

    def listener(**kwargs: object) -> str:
        specs = plan(ClusterOptions(data_dir=tmp_path, **kwargs))  # type: ignore[arg-type]
        return next(s for s in specs if s.kind == "console").settings["console.listener"]

    # Another Kafka port means another cluster on this machine: never the same console port.
    assert listener(port=0) == listener(port=19092) == "127.0.0.1:0"
    assert listener(port=19092, console_port=8181) == "127.0.0.1:8181"
    assert not [
        s for s in plan(ClusterOptions(data_dir=tmp_path, console=False)) if s.kind == "console"
    ]


def test_odradek_console_command_reads_cluster_json(tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text(
        json.dumps({"controller_address": "127.0.0.1:1234", "bootstrap_servers": "127.0.0.1:9999"})
    )
    args = argparse.Namespace(
        bootstrap_server=None, data_dir=tmp_path, host="127.0.0.1", port=8081, settings=["a.b=c"]
    )
    cmd = console_tool.command(args)
    assert cmd[1:3] == ["-m", "odradek.console"]
    sets = [cmd[i + 1] for i, v in enumerate(cmd) if v == "--set"]
    assert sets == [
        "console.listener=127.0.0.1:8081",
        "controller.address=127.0.0.1:1234",
        "bootstrap.servers=127.0.0.1:9999",
        "a.b=c",
    ]
    args.bootstrap_server = "kafka:9092"
    sets = [v for v in console_tool.command(args) if "=" in v]
    assert "bootstrap.servers=kafka:9092" in sets and not any("controller" in s for s in sets)


def test_login_redirects_stay_on_the_console() -> None:
    from aiohttp.test_utils import make_mocked_request

    from odradek.console.web import _next

    request = make_mocked_request("GET", "/login?next=/topics%3Fq%3Dab")
    assert _next(request) == "/topics?q=ab"
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "topics"):
        assert _next(request, target) == "/", target


def test_sessions_expire_and_never_hold_the_password_in_the_id() -> None:
    import asyncio

    from odradek.console.sessions import ClientPool
    from odradek.kafka_client import ClientConfig, KafkaClient

    async def run() -> None:
        pool = ClientPool(
            ClientConfig(("127.0.0.1:1",), security_protocol="SASL_SSL"), session_timeout_s=60
        )
        assert pool.security_enabled
        config = pool.with_credentials("SCRAM-SHA-512", "alice", "s3cret")
        assert (config.sasl_username, config.security_protocol) == ("alice", "SASL_SSL")
        session = pool.open_session(KafkaClient(config))
        other = pool.open_session(KafkaClient(config))
        assert session.session_id != other.session_id and len(session.session_id) >= 43
        assert "s3cret" not in session.session_id
        assert pool.session(session.session_id) is session
        session.last_used -= 61  # idle past console.session.timeout.ms
        assert pool.session(session.session_id) is None
        await pool.close_session(other.session_id)
        assert pool.session(other.session_id) is None
        assert pool.session("forged") is None
        await pool.close()

    asyncio.run(run())


def test_metrics_can_be_asked_for_named_series_only() -> None:
    import asyncio

    from prometheus_client import Counter

    from odradek.metrics import MetricsServer

    Counter("console_units_probe", "A counter for this test.").inc()

    async def get(port: int, target: str) -> str:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        body = (await reader.read()).decode()
        writer.close()
        return body

    async def run() -> tuple[str, str]:
        server = MetricsServer("127.0.0.1", 0)
        port = await server.start()
        try:
            return await get(port, "/metrics"), await get(
                port, "/metrics?name%5B%5D=odradek_build_info"
            )
        finally:
            await server.stop()

    full, only = asyncio.run(run())
    assert "console_units_probe_total" in full and "odradek_build_info" in full
    assert "odradek_build_info" in only and "console_units_probe_total" not in only


def test_secured_clusters_get_a_console_that_logs_users_in(tmp_path: Path) -> None:
    def consoles(security: str) -> list[str]:
        opts = ClusterOptions(data_dir=tmp_path, port=0, security=security)
        return [s.kind for s in plan(opts, None) if s.kind == "console"]

    assert consoles("sasl_ssl") == ["console"]
    assert consoles("ssl") == []  # a browser login cannot stand for a client certificate
