"""The web console in a real headless chromium against a real cluster (started the way
``odradek up`` starts it, console included).

Each page must load with no browser console errors and show what the cluster holds,
checked against the Kafka admin API (confluent-kafka's AdminClient and consumer
watermarks, not the console's own client); each action (create topic, change a
config, produce, browse, reset offsets, delete) must have its effect on the cluster,
and bad input must show Kafka's error message and change nothing. Screenshots of
every page land in build/console-screenshots/.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from console_browser import SCREENSHOTS, Browser, require_browser
from helpers.group_commits import commit_when_loaded

from odradek.tools.launcher import Cluster, ClusterOptions

SETTINGS = {
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "2000",
    "group.initial.rebalance.delay.ms": "0",
    "console.sample.interval.ms": "500",
}
SEED_TOPIC = "orders"
SEED_GROUP = "billing"


@pytest.fixture(scope="module")
def console_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_browser()
    cluster = Cluster(
        ClusterOptions(
            data_dir=tmp_path_factory.mktemp("console"),
            port=0,
            storage_nodes=2,
            replication_factor=2,
            settings=SETTINGS,
        )
    )
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def admin(console_cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": console_cluster.bootstrap_servers})


@pytest.fixture(scope="module")
def seeded(console_cluster: Cluster, admin: AdminClient) -> dict[str, int]:
    """orders: 3 partitions x 20 JSON records with headers; billing committed 5 per partition."""
    deadline = time.monotonic() + 30
    while True:  # both storage nodes may still be registering right after start
        try:
            admin.create_topics([NewTopic(SEED_TOPIC, 3, 2)])[SEED_TOPIC].result(30)
            break
        except KafkaException as exc:
            if "INVALID_REPLICATION_FACTOR" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    bootstrap = console_cluster.bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(60):
        producer.produce(
            SEED_TOPIC,
            key=f"user-{i % 5}",
            value=json.dumps({"order": i, "amount": i * 2}),
            partition=i % 3,
            headers={"source": b"seed"},
        )
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": SEED_GROUP})
    commit_when_loaded(consumer, [TopicPartition(SEED_TOPIC, p, 5) for p in range(3)])
    consumer.close()
    return {"records": 60}


@pytest.fixture(scope="module")
def browser(console_cluster: Cluster) -> Iterator[Browser]:
    b = Browser(console_cluster.console_url)
    yield b
    b.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex}"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def topic_names(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


def topic_config(admin: AdminClient, topic: str, name: str) -> str | None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    entry = configs.get(name)
    return None if entry is None else entry.value


def post_form(url: str, fields: dict[str, str]) -> tuple[int, str]:
    """A form post without the browser (what a user who bypasses the page's script sends)."""
    data = urllib.parse.urlencode(fields).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_every_page_shows_what_the_cluster_holds(
    console_cluster: Cluster, admin: AdminClient, seeded: dict[str, int], browser: Browser
) -> None:
    bootstrap = console_cluster.bootstrap_servers
    # Overview: counts, every service with health and version, the active controller.
    browser.open("/")
    assert int(browser.text("#topic-count")) == len(topic_names(admin))
    browser.wait(
        lambda: len([r for r in browser.all("#nodes-table tbody tr") if "ready" in r.text]) >= 6,
        what="every service reported ready by the live refresh",
    )
    rows = {r.get_attribute("data-kind"): r.text for r in browser.all("#nodes-table tbody tr")}
    assert "active controller" in rows["controller"]
    assert {"gateway", "storage", "coordinator", "offset store", "controller"} <= set(rows)
    storage_rows = browser.all("#nodes-table tr[data-kind=storage]")
    assert len(storage_rows) == 2
    assert all("storage-10" in r.text for r in storage_rows), "log dirs shown per storage node"
    browser.wait(lambda: "bytes in" in browser.text("#chart-bytes"), what="traffic chart drawn")
    assert int(browser.text("#under-replicated-count")) == 0
    browser.screenshot("overview")

    # Topics: exactly the topics the admin API lists.
    browser.open("/topics")
    shown = browser.wait(
        lambda: {r.get_attribute("data-name") for r in browser.all("#topics-table tr[data-name]")}
    )
    assert shown == topic_names(admin)

    def seed_cells() -> list[str]:  # read again if a live refresh swaps the table meanwhile
        row = browser.css(f"#topics-table tr[data-name='{SEED_TOPIC}']")
        return [str(td.text) for td in row.find_elements("css selector", "td")]

    cells = browser.wait(seed_cells, what="the seed topic's row")
    assert cells[1] == "3"  # partitions
    assert cells[2] == "2"  # replication
    browser.screenshot("topics")

    # Topic page: per-partition log end offsets equal the high watermarks.
    browser.open(f"/topics/{SEED_TOPIC}")
    ends = end_offsets(bootstrap, SEED_TOPIC, 3)
    for p, end in ends.items():
        row = browser.css(f"#partitions-table tr[data-partition='{p}']")
        assert row.find_element("css selector", ".log-end").text == str(end)
        assert row.find_element("css selector", ".log-start").text == "0"
    assert browser.css("#configs-table tr[data-config='cleanup.policy']")
    browser.screenshot("topic")

    # Messages: newest first, JSON pretty-printed, headers shown.
    browser.open(f"/topics/{SEED_TOPIC}/messages?partition=1")
    offsets = [int(m.get_attribute("data-offset")) for m in browser.all("#message-list li.message")]
    assert offsets == list(range(ends[1] - 1, -1, -1))
    first = browser.css("#message-list li.message")
    assert '"order": 58' in first.find_element("css selector", "pre.value").text
    assert "source" in first.text and "seed" in first.text
    browser.screenshot("messages")

    # Groups: the committed offsets and lag kafka-consumer-groups.sh would print.
    browser.open("/groups")
    row = browser.css(f"#groups-table tr[data-name='{SEED_GROUP}']")
    expected_lag = sum(ends.values()) - 3 * 5
    assert row.find_element("css selector", ".group-lag").text == str(expected_lag)
    browser.screenshot("groups")
    browser.open(f"/groups/{SEED_GROUP}")
    assert browser.text("#group-state") == "Empty"
    assert browser.text("#total-lag") == str(expected_lag)
    for p in range(3):
        cells = browser.css(f"#offsets-table tr[data-tp='{SEED_TOPIC}-{p}']")
        assert cells.find_element("css selector", ".committed").text == "5"
        assert cells.find_element("css selector", ".lag").text == str(ends[p] - 5)
    browser.wait(lambda: "lag" in browser.text("#chart-lag"), what="lag chart drawn")
    browser.screenshot("group")

    # A phone-sized window: same pages, readable (screenshots for a person to look at).
    browser.driver.set_window_size(390, 844)
    try:
        browser.open("/topics")
        browser.screenshot("phone-topics")
        browser.open(f"/topics/{SEED_TOPIC}/messages?partition=0")
        browser.screenshot("phone-messages")
        width = browser.driver.execute_script("return document.documentElement.scrollWidth")
        assert width <= 400, "the page must not scroll sideways on a phone"
    finally:
        browser.driver.set_window_size(1366, 900)
    for name in ("overview", "topics", "topic", "messages", "groups", "group", "phone-topics"):
        path = SCREENSHOTS / f"{name}.png"
        assert path.exists() and path.stat().st_size > 10_000, path


def test_create_topic_and_invalid_names(
    console_cluster: Cluster, admin: AdminClient, browser: Browser
) -> None:
    before = topic_names(admin)
    bad = "bad name!"
    browser.open("/topics/new")
    browser.type("#name", bad)
    browser.submit("#create-submit")
    error = browser.wait(lambda: browser.text("#form-error"), what="the create error")
    # Kafka's own message, the one the admin API gets for the same request.
    futures = admin.create_topics([NewTopic(bad, 1, 1)], validate_only=True)
    with pytest.raises(KafkaException) as info:
        futures[bad].result(10)
    # Led by Kafka's error name, as Kafka's tools print the exception before its message.
    assert error == f"INVALID_TOPIC_EXCEPTION: {info.value.args[0].str()}"
    browser.screenshot("create-topic-error")
    browser.type("#partitions", "0")
    browser.type("#name", "fine-name")
    browser.submit("#create-submit")
    assert "invalid non-positive value" in browser.wait(lambda: browser.text("#form-error"))
    assert topic_names(admin) == before, "a refused create changed nothing"

    name = f"created-{uuid.uuid4().hex[:8]}"
    browser.type("#name", name)
    browser.type("#partitions", "4")
    browser.type("#configs", "retention.ms=3600000")
    browser.submit("#create-submit")
    browser.wait(lambda: browser.text("#notice"), what="created notice")
    assert browser.text("#topic-name") == name
    browser.assert_no_console_errors()
    metadata = admin.list_topics(name, timeout=10).topics[name]
    assert len(metadata.partitions) == 4
    assert topic_config(admin, name, "retention.ms") == "3600000"


def test_config_edit_validates(
    console_cluster: Cluster, admin: AdminClient, seeded: dict[str, int], browser: Browser
) -> None:
    before = topic_config(admin, SEED_TOPIC, "retention.ms")
    browser.open(f"/topics/{SEED_TOPIC}")
    browser.css("#configs details summary").click()
    browser.type("#config-name", "retention.ms")
    browser.type("#config-value", "not-a-number")
    browser.submit("#config-submit")
    error = browser.wait(lambda: browser.text("#form-error"))
    assert "retention.ms" in error and "not-a-number" in error
    assert topic_config(admin, SEED_TOPIC, "retention.ms") == before
    browser.screenshot("config-error")
    browser.type("#config-name", "no.such.config")
    browser.type("#config-value", "1")
    browser.submit("#config-submit")
    assert "no.such.config" in browser.wait(lambda: browser.text("#form-error"))
    browser.type("#config-name", "retention.ms")
    browser.type("#config-value", "7200000")
    browser.submit("#config-submit")
    browser.wait(lambda: browser.text("#notice"))
    assert topic_config(admin, SEED_TOPIC, "retention.ms") == "7200000"
    value = browser.css("#configs-table tr[data-config='retention.ms'] .config-value").text
    assert value == "7200000"


def test_produce_then_browse(
    console_cluster: Cluster, admin: AdminClient, seeded: dict[str, int], browser: Browser
) -> None:
    bootstrap = console_cluster.bootstrap_servers
    before = end_offsets(bootstrap, SEED_TOPIC, 3)
    browser.open(f"/topics/{SEED_TOPIC}/messages?partition=2")
    browser.type("#p-partition", "2")
    browser.type("#p-key", "console-key")
    browser.type("#p-value", '{"hello": "console"}')
    browser.type("#p-headers", "trace=abc123")
    browser.submit("#produce-submit")
    browser.wait(lambda: "offset" in browser.text("#notice"))
    assert end_offsets(bootstrap, SEED_TOPIC, 3)[2] == before[2] + 1
    # The record as a real consumer reads it.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"v-{uuid.uuid4().hex}"})
    consumer.assign([TopicPartition(SEED_TOPIC, 2, before[2])])
    record = None
    deadline = time.monotonic() + 20
    while record is None and time.monotonic() < deadline:
        record = consumer.poll(1.0)
    consumer.close()
    assert record is not None and record.error() is None
    assert record.key() == b"console-key" and record.value() == b'{"hello": "console"}'
    assert record.headers() == [("trace", b"abc123")]
    newest = browser.css("#message-list li.message")
    assert newest.get_attribute("data-offset") == str(before[2])
    assert "console-key" in newest.text and "abc123" in newest.text

    # Oldest first from an offset, with a key filter; hex rendering.
    browser.open(
        f"/topics/{SEED_TOPIC}/messages?partition=0&order=oldest&offset=3&key=user-0&format=hex"
    )
    shown = [int(m.get_attribute("data-offset")) for m in browser.all("#message-list li.message")]
    assert shown and all(o >= 3 for o in shown) and shown == sorted(shown)
    assert "75 73 65 72 2d 30" in browser.css("#message-list pre.key").text  # "user-0" in hex
    # Substring filter over values.
    browser.open(f"/topics/{SEED_TOPIC}/messages?partition=0&contains=%22order%22%3A+9")
    values = [p.text for p in browser.all("#message-list pre.value")]
    assert values and all('"order": 9' in v for v in values)
    # From a timestamp in the future: nothing newer, oldest first shows nothing.
    browser.open(
        f"/topics/{SEED_TOPIC}/messages?partition=0&order=oldest&timestamp=2999-01-01T00:00:00Z"
    )
    assert browser.css("#no-messages")
    browser.screenshot("messages-filtered")
    # Bad input: Kafka's words for a missing partition, a plain message for a non-number.
    browser.open(f"/topics/{SEED_TOPIC}/messages?partition=9", expect_errors=True)
    assert "Partition 9" in browser.text("#browse-error")
    browser.open(f"/topics/{SEED_TOPIC}/messages?partition=0&offset=abc", expect_errors=True)
    assert "Invalid offset" in browser.text("#browse-error")
    browser.open(f"/topics/{SEED_TOPIC}/messages?partition=0")
    browser.type("#p-partition", "7")
    browser.type("#p-value", "x")
    browser.submit("#produce-submit")
    assert "Partition 7" in browser.wait(lambda: browser.text("#form-error"))
    assert end_offsets(bootstrap, SEED_TOPIC, 3) == {**before, 2: before[2] + 1}


def test_reset_offsets_preview_then_execute(
    console_cluster: Cluster, admin: AdminClient, seeded: dict[str, int], browser: Browser
) -> None:
    bootstrap = console_cluster.bootstrap_servers
    before = committed(bootstrap, SEED_GROUP, SEED_TOPIC, 3)
    browser.open(f"/groups/{SEED_GROUP}")
    browser.select("#strategy", "offset")
    browser.type("#reset-value", "2")
    browser.submit("#reset-preview")
    browser.wait(lambda: browser.all("#plan-table tbody tr"))
    assert [c.text for c in browser.all("#plan-table .new-offset")] == ["2", "2", "2"]
    assert committed(bootstrap, SEED_GROUP, SEED_TOPIC, 3) == before, "a dry run commits nothing"
    browser.screenshot("reset-preview")
    browser.type("#reset-value", "-4")
    browser.submit("#reset-preview")
    assert "must not be negative" in browser.wait(lambda: browser.text("#form-error"))
    browser.select("#strategy", "earliest")
    browser.submit("#reset-execute")
    browser.wait(lambda: browser.text("#notice"))
    assert committed(bootstrap, SEED_GROUP, SEED_TOPIC, 3) == {0: 0, 1: 0, 2: 0}
    assert browser.text("#total-lag") == str(sum(end_offsets(bootstrap, SEED_TOPIC, 3).values()))

    # An active group cannot be reset: the button is disabled, the server refuses too.
    group = f"active-{uuid.uuid4().hex[:6]}"
    stop = threading.Event()
    joined = threading.Event()

    def consume() -> None:
        c = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
        )
        c.subscribe([SEED_TOPIC])
        while not stop.is_set():
            if c.poll(0.2) is not None:
                joined.set()
        c.close()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    try:
        assert joined.wait(30)
        browser.open(f"/groups/{group}")
        browser.wait(lambda: browser.text("#group-state") == "Stable")
        assert browser.css("#reset-execute").get_attribute("disabled") is not None
        before_active = committed(bootstrap, group, SEED_TOPIC, 3)
        status, body = post_form(
            f"{console_cluster.console_url}groups/{group}/reset",
            {"strategy": "earliest", "topic": SEED_TOPIC, "action": "execute"},
        )
        assert status == 400 and "inactive, but the current state is Stable" in body
        assert committed(bootstrap, group, SEED_TOPIC, 3) == before_active
    finally:
        stop.set()
        thread.join(30)


def test_delete_needs_the_typed_name(
    console_cluster: Cluster, admin: AdminClient, browser: Browser
) -> None:
    name = f"doomed-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(30)
    browser.open(f"/topics/{name}")
    assert browser.css("#delete-submit").get_attribute("disabled") is not None
    status, body = post_form(
        f"{console_cluster.console_url}topics/{name}/delete", {"confirm": "nope"}
    )
    assert status == 400 and "nothing was deleted" in body
    assert name in topic_names(admin)
    browser.type("#confirm", name)
    browser.submit("#delete-submit")
    browser.wait(lambda: browser.text("#notice"))
    assert name not in topic_names(admin)
    browser.assert_no_console_errors()


def test_keyboard_only_and_live_updates(
    console_cluster: Cluster, seeded: dict[str, int], browser: Browser
) -> None:
    from selenium.webdriver.common.keys import Keys

    browser.open("/")
    browser.keys(Keys.TAB)
    assert browser.driver.switch_to.active_element.text == "Skip to content"
    browser.keys("g", "t")
    browser.wait(lambda: browser.driver.current_url.endswith("/topics"))
    browser.keys("/")
    assert browser.driver.switch_to.active_element.get_attribute("id") == "topic-search"
    browser.keys("ord")
    visible = [r for r in browser.all("#topics-table tbody tr[data-name]") if r.is_displayed()]
    assert [r.get_attribute("data-name") for r in visible] == [SEED_TOPIC]
    assert "q=ord" in browser.driver.current_url, "the search is a stable URL"
    # Tab to the topic link and follow it with Enter.
    for _ in range(20):
        browser.keys(Keys.TAB)
        if browser.driver.switch_to.active_element.text == SEED_TOPIC:
            break
    browser.keys(Keys.ENTER)
    browser.wait(lambda: browser.driver.current_url.endswith(f"/topics/{SEED_TOPIC}"))

    # Live: a record produced elsewhere shows up without a reload.
    browser.driver.execute_script("window.__notReloaded = true")
    cell = "#partitions-table tr[data-partition='0'] .log-end"
    before = int(browser.text(cell))
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap_servers})
    producer.produce(SEED_TOPIC, value=b"live", partition=0)
    assert producer.flush(30) == 0
    browser.wait(lambda: int(browser.text(cell)) == before + 1, timeout=30, what="live refresh")
    assert browser.driver.execute_script("return window.__notReloaded === true")
    browser.assert_no_console_errors()
