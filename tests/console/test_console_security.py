"""The web console on a secured cluster (``odradek up --security sasl_ssl``): users log in
with their own SCRAM credentials, checked by the cluster, and the console acts as them.

A real headless chromium against a real SASL_SSL cluster whose authorizer refuses what
no ACL allows. The super user (confluent-kafka's AdminClient, SCRAM-SHA-512) creates
``alice`` (SCRAM-SHA-512) and ``bob`` (SCRAM-SHA-256 only, so the console must fall
back from its preferred mechanism) and grants each DESCRIBE on different topics; each
user's topic list in the browser must equal what a Kafka client logged in as that user
lists; a delete the ACLs refuse shows Kafka's TOPIC_AUTHORIZATION_FAILED and the topic
stays; a wrong password is refused and opens no session; logout ends the session on
the server, not only in the browser.
"""

from __future__ import annotations

import http.client
import ssl
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from console_browser import Browser, require_browser

from odradek.tools.launcher import Cluster, ClusterOptions

PASSWORDS = {"alice": "alice-Secret-1", "bob": "bob-Secret-2"}
SUFFIX = uuid.uuid4().hex[:6]
SHARED = f"shared-{SUFFIX}"  # alice and bob may DESCRIBE it; neither may DELETE it
ALICE_ONLY = f"alice-{SUFFIX}"
BOB_ONLY = f"bob-{SUFFIX}"
HIDDEN = f"hidden-{SUFFIX}"  # no ACL at all


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_browser()
    cluster = Cluster(
        ClusterOptions(
            data_dir=tmp_path_factory.mktemp("console-secure"),
            port=0,
            security="sasl_ssl",
            settings={"console.sample.interval.ms": "500"},
        )
    )
    cluster.start()
    yield cluster
    cluster.stop()


def client_conf(cluster: Cluster, user: str, password: str, mechanism: str) -> dict[str, Any]:
    assert cluster.security is not None
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(cluster.security.ca_file),
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.fixture(scope="module")
def admin(secure_cluster: Cluster) -> AdminClient:
    """The super user: makes alice and bob, four topics, and the ACLs."""
    assert secure_cluster.security is not None
    client = AdminClient(
        client_conf(secure_cluster, "admin", secure_cluster.security.password, "SCRAM-SHA-512")
    )
    upserts = [
        UserScramCredentialUpsertion(
            "alice",
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
            PASSWORDS["alice"].encode(),
        ),
        UserScramCredentialUpsertion(
            "bob",
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
            PASSWORDS["bob"].encode(),
        ),
    ]
    for f in client.alter_user_scram_credentials(upserts).values():
        f.result(30)
    topics = [NewTopic(t, 1, 1) for t in (SHARED, ALICE_ONLY, BOB_ONLY, HIDDEN)]
    for f in client.create_topics(topics).values():
        f.result(30)

    def allow(user: str, topic: str, operation: AclOperation) -> AclBinding:
        return AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            f"User:{user}",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )

    acls = [
        allow("alice", SHARED, AclOperation.DESCRIBE),
        allow("alice", ALICE_ONLY, AclOperation.ALL),
        allow("bob", SHARED, AclOperation.DESCRIBE),
        allow("bob", BOB_ONLY, AclOperation.DESCRIBE),
    ]
    for f in client.create_acls(acls).values():
        f.result(30)
    return client


def topics_seen_by(cluster: Cluster, user: str, mechanism: str) -> set[str]:
    """The topics a Kafka client logged in as ``user`` lists (Metadata, as Kafka filters it)."""
    client = AdminClient(client_conf(cluster, user, PASSWORDS[user], mechanism))
    return set(client.list_topics(timeout=30).topics)


@pytest.fixture()
def browser(secure_cluster: Cluster) -> Iterator[Browser]:
    b = Browser(secure_cluster.console_url, accept_insecure_certs=True)
    yield b
    b.close()


def log_in(browser: Browser, user: str, password: str) -> None:
    browser.open("/login")
    browser.type("#username", user)
    browser.type("#password", password)
    browser.submit("#login-submit")


def listed_topics(browser: Browser) -> set[str]:
    browser.open("/topics")
    # Read again if a live refresh swaps the table while the rows are read.
    return set(
        browser.wait(
            lambda: {
                str(r.get_attribute("data-name"))
                for r in browser.all("#topics-table tbody tr[data-name]")
            }
        )
    )


def test_console_is_https_and_asks_for_a_login(secure_cluster: Cluster, browser: Browser) -> None:
    assert secure_cluster.console_url.startswith("https://")
    browser.open("/topics")
    browser.wait(lambda: "/login" in browser.driver.current_url)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(browser.driver.current_url).query)
    assert query == {"next": ["/topics"]}
    assert browser.css("#login-form")
    browser.screenshot("secure-login")


def test_wrong_password_is_refused(
    secure_cluster: Cluster, admin: AdminClient, browser: Browser
) -> None:
    log_in(browser, "alice", "not-her-password")
    assert "Authentication failed" in browser.text("#login-error")
    assert "/login" in browser.driver.current_url
    assert not browser.driver.get_cookies()
    browser.screenshot("secure-login-refused")
    log_in(browser, "mallory", "anything")  # an unknown user reads the same
    assert "Authentication failed" in browser.text("#login-error")
    browser.open("/topics")
    browser.wait(lambda: "/login" in browser.driver.current_url)


def test_each_user_sees_the_topics_their_acls_allow(
    secure_cluster: Cluster, admin: AdminClient, browser: Browser
) -> None:
    log_in(browser, "alice", PASSWORDS["alice"])
    assert browser.text("#user-name") == "alice"
    cookie = next(c for c in browser.driver.get_cookies() if c["name"] == "odradek_console_session")
    assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert PASSWORDS["alice"] not in cookie["value"]
    alice = listed_topics(browser)
    browser.screenshot("secure-topics-alice")
    assert alice == topics_seen_by(secure_cluster, "alice", "SCRAM-SHA-512")
    assert {SHARED, ALICE_ONLY} <= alice and not alice & {BOB_ONLY, HIDDEN}

    browser.submit("#logout")
    browser.wait(lambda: "/login" in browser.driver.current_url)
    log_in(browser, "bob", PASSWORDS["bob"])  # SCRAM-SHA-256 only: the console falls back
    assert browser.text("#user-name") == "bob"
    bob = listed_topics(browser)
    browser.screenshot("secure-topics-bob")
    assert bob == topics_seen_by(secure_cluster, "bob", "SCRAM-SHA-256")
    assert {SHARED, BOB_ONLY} <= bob and not bob & {ALICE_ONLY, HIDDEN}

    browser.open(f"/topics/{ALICE_ONLY}", expect_errors=True)  # 403: not bob's to see
    assert "TOPIC_AUTHORIZATION_FAILED" in browser.text("#page-error")


def test_a_refused_delete_shows_kafkas_error_and_changes_nothing(
    secure_cluster: Cluster, admin: AdminClient, browser: Browser
) -> None:
    log_in(browser, "bob", PASSWORDS["bob"])
    browser.open(f"/topics/{SHARED}")
    browser.type("#confirm", SHARED)
    browser.submit("#delete-submit")
    browser.wait(lambda: browser.text("#form-error"))
    assert "TOPIC_AUTHORIZATION_FAILED: Topic authorization failed" in browser.text("#form-error")
    browser.screenshot("secure-delete-refused")
    assert SHARED in admin.list_topics(timeout=30).topics
    browser.assert_no_console_errors()


def test_logout_ends_the_session_on_the_server(
    secure_cluster: Cluster, admin: AdminClient, browser: Browser
) -> None:
    log_in(browser, "alice", PASSWORDS["alice"])
    session = browser.driver.get_cookie("odradek_console_session")["value"]
    assert get_status(secure_cluster, "/topics", session) == 200
    browser.submit("#logout")
    browser.wait(lambda: "/login" in browser.driver.current_url)
    # The old cookie value is no longer a session, whoever replays it.
    assert get_status(secure_cluster, "/topics", session) == 303
    assert get_status(secure_cluster, "/api/series/cluster", session) == 401


def get_status(cluster: Cluster, path: str, session: str) -> int:
    url = urllib.parse.urlsplit(cluster.console_url)
    context = ssl.create_default_context(cafile=str(cluster.security.ca_file))  # type: ignore[union-attr]
    conn = http.client.HTTPSConnection(url.hostname or "", url.port, context=context, timeout=30)
    try:
        conn.request("GET", path, headers={"Cookie": f"odradek_console_session={session}"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_group_lag_history_needs_describe_on_the_group(
    secure_cluster: Cluster, admin: AdminClient, browser: Browser
) -> None:
    """The lag chart's JSON is the console's own record; the cluster decides who reads it."""
    assert secure_cluster.security is not None
    log_in(browser, "alice", PASSWORDS["alice"])  # no ACL on any group
    alice = browser.driver.get_cookie("odradek_console_session")["value"]
    assert get_status(secure_cluster, "/api/series/groups/some-group", alice) == 403
    browser.submit("#logout")
    browser.wait(lambda: "/login" in browser.driver.current_url)
    log_in(browser, "admin", secure_cluster.security.password)  # a super user
    root = browser.driver.get_cookie("odradek_console_session")["value"]
    assert get_status(secure_cluster, "/api/series/groups/some-group", root) == 200
