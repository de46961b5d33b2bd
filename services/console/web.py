"""The console's pages and JSON endpoints (aiohttp handlers, Jinja2 templates).

Every page is rendered on the server from one round of Kafka requests, so a link is a
stable URL and a page works without JavaScript; ``static/console.js`` adds live
refresh (it re-fetches the page and swaps the regions marked ``data-live``) and draws
the charts from ``/api/series/...``. Forms post, then redirect (PRG) on success; on
failure the form is shown again with the broker's error message and nothing changed.

URLs: ``/`` overview, ``/topics`` (``?q=`` search), ``/topics/new``,
``/topics/{topic}``, ``/topics/{topic}/messages`` (browse and produce), ``/groups``,
``/groups/{group}``; with SASL also ``/login`` and ``/logout`` (every other URL but
``/static`` then needs a session, see :mod:`odradek.console.sessions`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web

from odradek.console import groups as groups_api
from odradek.console import messages as messages_api
from odradek.console import topics as topics_api
from odradek.console.log_sizes import sizes_by_node
from odradek.console.login import LoginFailed
from odradek.console.render import FORMATS, human_bytes, human_rate, parse_headers, render
from odradek.console.sessions import COOKIE, Session
from odradek.kafka_client import KafkaClient, KafkaClientError
from odradek.metadata_cache import NodeKind, NodeState, Snapshot
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.console.service import ConsoleService

HERE = Path(__file__).parent
SERVICE_KEY = web.AppKey("service", object)
KIND_NAMES = {
    NodeKind.GATEWAY: "gateway",
    NodeKind.STORAGE: "storage",
    NodeKind.CONTROLLER: "controller",
    NodeKind.COORDINATOR: "coordinator",
    NodeKind.OFFSET_STORE: "offset store",
}
SIZE_MAX_AGE_S = 5.0
SESSION_KEY = "session"
AUTHORIZATION_ERRORS = (
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
)
# What is served without a session when users must log in.
OPEN_PATHS = ("/login", "/static/")
log = logging.getLogger(__name__)


def _when(ms: int) -> str:
    if ms < 0:
        return "\u2013"  # en dash: no value
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        bytes=human_bytes,
        rate=human_rate,
        when=_when,
        q=lambda s: quote(str(s), safe=""),
    )
    env.globals["urlencode"] = urlencode
    return env


class Pages:
    def __init__(self, service: ConsoleService) -> None:
        self.service = service
        self.env = _environment()
        self._rows: tuple[Snapshot, list[topics_api.TopicRow]] | None = None

    # -- helpers ------------------------------------------------------------------------------
    def client(self, request: web.Request) -> KafkaClient:
        """The Kafka client this request acts through: the user's own with SASL."""
        session: Session | None = request.get(SESSION_KEY)
        if session is not None:
            return session.client
        if self.service.security_enabled:  # the middleware lets no such request through
            raise web.HTTPUnauthorized()
        return self.service.client_pool().anonymous()

    def page(
        self, request: web.Request, template: str, status: int = 200, **context: Any
    ) -> web.Response:
        started = request.get("started", time.perf_counter())
        session: Session | None = request.get(SESSION_KEY)
        html = self.env.get_template(template).render(
            path=request.path,
            security=self.service.security_enabled,
            user=session.username if session else "",
            posted=request.method != "GET",
            **context,
        )
        response = web.Response(text=html, status=status, content_type="text/html")
        response.headers["Server-Timing"] = (
            f"render;dur={(time.perf_counter() - started) * 1000:.1f}"
        )
        response.headers["Cache-Control"] = "no-store"
        return response

    async def topic_rows(self, client: KafkaClient) -> list[topics_api.TopicRow]:
        """Every topic the request may see: the controller's pushed snapshot when the
        console acts as itself, else (SASL, or no controller) the user's Metadata."""
        snapshot = self.service.snapshot()
        if snapshot is None or self.service.security_enabled:
            return await topics_api.list_topics(client)
        await client.metadata(topics=[])  # the brokers only: small, keeps them current
        if self._rows is None or self._rows[0] is not snapshot:
            # Built once per metadata change, shared read-only by every page until the next.
            self._rows = (snapshot, topics_api.snapshot_rows(snapshot))
        return self._rows[1]

    def error_page(self, request: web.Request, message: str, status: int) -> web.Response:
        return self.page(request, "error.html", status=status, message=message, title="Error")

    # -- login ----------------------------------------------------------------------------------
    async def login_form(self, request: web.Request) -> web.Response:
        if not self.service.security_enabled:
            raise web.HTTPSeeOther("/")
        return self.page(
            request, "login.html", title="Log in", error="", username="", next=_next(request)
        )

    async def login(self, request: web.Request) -> web.StreamResponse:
        if not self.service.security_enabled:
            raise web.HTTPSeeOther("/")
        form = await request.post()
        username = str(form.get("username", "")).strip()
        target = _next(request, str(form.get("next", "")))
        try:
            session = await self.service.authenticator.login(
                self.service.client_pool(), username, str(form.get("password", ""))
            )
        except (LoginFailed, KafkaClientError) as exc:
            return self.page(
                request,
                "login.html",
                status=401,
                title="Log in",
                error=str(exc),
                username=username,
                next=target,
            )
        log.info("console login: %s (%s)", session.username, session.mechanism)
        response = web.HTTPSeeOther(target)
        response.set_cookie(
            COOKIE,
            session.session_id,
            path="/",
            secure=True,
            httponly=True,
            samesite="Strict",
        )
        raise response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        session: Session | None = request.get(SESSION_KEY)
        if session is not None:
            await self.service.client_pool().close_session(session.session_id)
        response = web.HTTPSeeOther("/login" if self.service.security_enabled else "/")
        response.del_cookie(COOKIE, path="/")
        raise response

    # -- overview -------------------------------------------------------------------------------
    async def overview(self, request: web.Request) -> web.Response:
        client = self.client(request)
        rows = await self.topic_rows(client)
        snapshot = self.service.snapshot()
        sampler = self.service.sampler
        sizes = await sampler.sizes_for(client, max_age_s=SIZE_MAX_AGE_S)
        dirs = sizes_by_node(sizes)
        nodes = []
        if snapshot is not None:
            shards: dict[int, int] = {}
            for s in snapshot.raw.coordinator_shards:
                shards[s.coordinator_id] = shards.get(s.coordinator_id, 0) + 1
            leaders: dict[int, int] = {}
            replicas: dict[int, int] = {}
            for t in snapshot.raw.topics:
                for p in t.partitions:
                    leaders[p.leader] = leaders.get(p.leader, 0) + 1
                    for r in p.replicas:
                        replicas[r] = replicas.get(r, 0) + 1
            for n in sorted(snapshot.raw.nodes, key=lambda n: (n.kind, n.node_id)):
                status = sampler.nodes.get(n.node_id)
                if n.kind == NodeKind.GATEWAY:
                    role = f"Kafka listener {n.advertised_host or n.host}:{n.kafka_port}"
                elif n.kind == NodeKind.STORAGE:
                    role = f"{leaders.get(n.node_id, 0)} leaders, {replicas.get(n.node_id, 0)} replicas"
                elif n.kind == NodeKind.COORDINATOR:
                    role = f"{shards.get(n.node_id, 0)} of {len(snapshot.raw.coordinator_shards)} group shards"
                else:
                    role = "committed offsets"
                nodes.append(
                    {
                        "id": n.node_id,
                        "kind": KIND_NAMES.get(n.kind, str(n.kind)),
                        "address": f"{n.host}:{n.grpc_port}",
                        "state": NodeState.Name(n.state).lower().replace("_", " "),
                        "ready": None if status is None else status.ready,
                        "version": status.version if status else "",
                        "role": role,
                        "dirs": dirs.get(n.node_id, []) if n.kind == NodeKind.STORAGE else [],
                    }
                )
        controllers = [
            {"address": a, "role": s.role or "probing", "ready": s.ready, "version": s.version}
            for a, s in sampler.controllers.items()
        ]
        active = snapshot.raw.controller_id if snapshot is not None else -1
        partitions = [(t, p) for t in rows for p in t.partitions]
        return self.page(
            request,
            "overview.html",
            title="Overview",
            cluster_id=client.cluster_id or (snapshot.cluster_id if snapshot else ""),
            brokers=sorted(client.brokers.values(), key=lambda b: b.node_id),
            nodes=nodes,
            controllers=controllers,
            active_controller=active,
            topic_count=len(rows),
            partition_count=len(partitions),
            under_replicated=[(t.name, p) for t, p in partitions if p.under_replicated],
            offline=[(t.name, p) for t, p in partitions if p.leader < 0],
            size_source=sizes.source,
            total_size=sum(sizes.partitions.values()) if sizes.partitions else None,
        )

    # -- topics ----------------------------------------------------------------------------------
    async def topics(self, request: web.Request) -> web.Response:
        client = self.client(request)
        rows = await self.topic_rows(client)
        q = request.query.get("q", "").strip()
        sampler = self.service.sampler
        sizes = await sampler.sizes_for(client, max_age_s=SIZE_MAX_AGE_S)
        shown = [r for r in rows if q.lower() in r.name.lower()] if q else rows
        return self.page(
            request,
            "topics.html",
            title="Topics",
            q=q,
            notice=_notice(request),
            total=len(rows),
            topics=[
                {
                    "row": r,
                    "size": sizes.topic_size(r.name, len(r.partitions)),
                    "messages_rate": sampler.topic_messages.get(r.name),
                    "bytes_in": sampler.topic_bytes_in.get(r.name),
                }
                for r in shown
            ],
        )

    async def new_topic(self, request: web.Request) -> web.Response:
        return self.page(request, "topic_new.html", title="Create topic", form={}, error="")

    async def create_topic(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        name = str(form.get("name", "")).strip()
        try:
            partitions = _int_field(form, "partitions", "Number of partitions", default=1)
            replication = _int_field(form, "replication_factor", "Replication factor", default=-1)
            configs = _config_lines(str(form.get("configs", "")))
            await topics_api.create_topic(
                self.client(request), name, partitions, replication, configs
            )
        except (KafkaClientError, ValueError) as exc:
            message = _message(exc)
            return self.page(
                request,
                "topic_new.html",
                status=400,
                title="Create topic",
                form=form,
                error=message,
            )
        raise web.HTTPSeeOther(f"/topics/{quote(name, safe='')}?created=1")

    async def topic(
        self,
        request: web.Request,
        error: str = "",
        status: int = 200,
        form: dict[str, str] | None = None,
    ) -> web.Response:
        name = request.match_info["topic"]
        client = self.client(request)
        try:
            row = await topics_api.describe_topic(client, name)
        except KafkaClientError as exc:
            status = 403 if exc.code in AUTHORIZATION_ERRORS else 404
            return self.error_page(request, _message(exc), status)
        configs_error = ""
        try:  # a user may describe a topic but not its configs (DESCRIBE_CONFIGS)
            configs = await topics_api.describe_configs(client, name)
        except KafkaClientError as exc:
            configs, configs_error = [], _message(exc)
        sizes = await self.service.sampler.sizes_for(client, max_age_s=SIZE_MAX_AGE_S)
        for p in row.partitions:
            p.size = sizes.partitions.get((name, p.partition))
        return self.page(
            request,
            "topic.html",
            status=status,
            title=f"Topic {name}",
            topic=row,
            configs=configs,
            configs_error=configs_error,
            size=sizes.topic_size(name, len(row.partitions)),
            messages_rate=self.service.sampler.topic_messages.get(name),
            error=error,
            form=form or {},
            notice=_notice(request),
        )

    async def alter_configs(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        form = {k: str(v) for k, v in (await request.post()).items()}
        try:
            set_values = _config_lines(form.get("set", ""))
            if form.get("name", "").strip():
                set_values[form["name"].strip()] = form.get("value", "")
            delete = [k.strip() for k in form.get("delete", "").split(",") if k.strip()]
            if not set_values and not delete:
                raise ValueError("Nothing to change: give a config name and value")
            await topics_api.alter_configs(self.client(request), name, set_values, delete)
        except (KafkaClientError, ValueError) as exc:
            message = _message(exc)
            return await self.topic(request, error=message, status=400, form=form)
        raise web.HTTPSeeOther(f"/topics/{quote(name, safe='')}?configs=1#configs")

    async def delete_topic(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        form = await request.post()
        if str(form.get("confirm", "")) != name:
            return await self.topic(
                request,
                error=f"Type the topic name '{name}' to confirm the deletion; nothing was deleted.",
                status=400,
            )
        try:
            await topics_api.delete_topic(self.client(request), name)
        except KafkaClientError as exc:
            return await self.topic(request, error=_message(exc), status=400)
        raise web.HTTPSeeOther(f"/topics?deleted={quote(name, safe='')}")

    # -- messages --------------------------------------------------------------------------------
    async def messages(
        self,
        request: web.Request,
        error: str = "",
        status: int = 200,
        form: dict[str, str] | None = None,
    ) -> web.Response:
        name = request.match_info["topic"]
        query = request.query
        fmt = query.get("format", "auto")
        if fmt not in FORMATS:
            fmt = "auto"
        browse_error = ""
        page = None
        req = None
        try:
            req = messages_api.BrowseRequest(
                partition=_query_int(query, "partition", 0) or 0,
                offset=_query_int(query, "offset", None),
                timestamp=_parse_time(query.get("timestamp", "")),
                newest_first=query.get("order", "newest") != "oldest",
                limit=_query_int(query, "limit", 50) or 50,
                key=query.get("key") or None,
                contains=query.get("contains") or None,
            )
            page = await messages_api.browse(self.client(request), name, req)
        except (KafkaClientError, ValueError) as exc:
            browse_error = _message(exc)
        try:
            topic = await self.client(request).topic(name)
            partitions = sorted(p.partition_index for p in topic.partitions)
        except KafkaClientError:
            partitions = []
        shown = []
        for m in page.messages if page else []:
            key, key_fmt = render(m.key, fmt)
            value, value_fmt = render(m.value, fmt)
            shown.append(
                {
                    "offset": m.offset,
                    "timestamp": m.timestamp,
                    "key": key,
                    "key_format": key_fmt,
                    "value": value,
                    "value_format": value_fmt,
                    "headers": [(h, render(v, fmt)[0]) for h, v in m.headers],
                    "size": len(m.value or b"") + len(m.key or b""),
                }
            )
        return self.page(
            request,
            "messages.html",
            status=status if not browse_error or status != 200 else 400,
            title=f"Messages in {name}",
            topic=name,
            partitions=partitions,
            query=dict(query),
            fmt=fmt,
            formats=FORMATS,
            page=page,
            browse=req,
            messages=shown,
            browse_error=browse_error,
            error=error,
            form=form or {},
            produced=_notice(request),
        )

    async def produce(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        form = {k: str(v) for k, v in (await request.post()).items()}
        try:
            partition = form.get("partition", "").strip()
            headers = parse_headers(form.get("headers", ""))
            key = form.get("key", "")
            produced = await messages_api.produce(
                self.client(request),
                name,
                key.encode() if key or form.get("key_empty") else None,
                form.get("value", "").encode(),
                headers,
                int(partition) if partition else None,
            )
        except (KafkaClientError, ValueError) as exc:
            message = _message(exc)
            return await self.messages(request, error=message, status=400, form=form)
        target = urlencode(
            {"partition": produced.partition, "order": "newest", "produced": produced.offset}
        )
        raise web.HTTPSeeOther(f"/topics/{quote(name, safe='')}/messages?{target}")

    # -- groups ----------------------------------------------------------------------------------
    async def groups(self, request: web.Request) -> web.Response:
        rows = await self.service.sampler.all_groups(self.client(request))
        q = request.query.get("q", "").strip()
        if q:
            rows = [r for r in rows if q.lower() in r.group_id.lower()]
        return self.page(request, "groups.html", title="Consumer groups", groups=rows, q=q)

    async def group(
        self,
        request: web.Request,
        error: str = "",
        status: int = 200,
        plan: list[groups_api.ResetRow] | None = None,
        form: dict[str, str] | None = None,
    ) -> web.Response:
        group_id = request.match_info["group"]
        client = self.client(request)
        try:
            row = await groups_api.describe_group(client, group_id)
        except KafkaClientError as exc:
            return self.error_page(request, _message(exc), 502)
        if row.state == "Dead" and not row.offsets:
            return self.error_page(request, f"Consumer group '{group_id}' does not exist.", 404)
        self.service.sampler.record_lag(group_id, row.lag)
        return self.page(
            request,
            "group.html",
            status=status,
            title=f"Group {group_id}",
            group=row,
            topics=row.topics,
            error=error,
            plan=plan,
            form=form or {},
            strategies=groups_api.RESET_STRATEGIES,
            inactive=row.state in groups_api.INACTIVE_STATES,
            notice=_notice(request),
        )

    async def reset_offsets(self, request: web.Request) -> web.Response:
        group_id = request.match_info["group"]
        form = {k: str(v) for k, v in (await request.post()).items()}
        client = self.client(request)
        try:
            row = await groups_api.describe_group(client, group_id)
            strategy = form.get("strategy", "")
            value = form.get("value", "")
            if strategy == "timestamp":
                parsed = _parse_time(value)
                if parsed is None:
                    raise ValueError("Give a timestamp (ISO 8601 or epoch milliseconds)")
                value = str(parsed)
            plan = await groups_api.plan_reset(
                client, row, strategy, value, form.get("topic") or None
            )
            if form.get("action") != "execute":
                return await self.group(request, plan=plan, form=form)
            await groups_api.execute_reset(client, row, plan)
        except (KafkaClientError, ValueError) as exc:
            message = _message(exc)
            return await self.group(request, error=message, status=400, form=form)
        raise web.HTTPSeeOther(f"/groups/{quote(group_id, safe='')}?reset={len(plan)}")

    # -- JSON for the charts ------------------------------------------------------------------
    async def cluster_series(self, request: web.Request) -> web.Response:
        series = self.service.sampler.cluster
        keys = [k for k in request.query.get("keys", "bytes_in,bytes_out").split(",") if k]
        return web.json_response({k: _series_json(series[k]) for k in keys})

    async def group_series(self, request: web.Request) -> web.Response:
        group_id = request.match_info["group"]
        if request.get(SESSION_KEY) is not None:
            # The history is the console's own; who may read it is the cluster's call:
            # FindCoordinator needs DESCRIBE on the group, as the group page does.
            try:
                await groups_api.find_coordinators(self.client(request), [group_id])
            except KafkaClientError as exc:
                return web.json_response({"error": _message(exc)}, status=403)
        series = self.service.sampler.group_lag[group_id]
        return web.json_response({"lag": _series_json(series)})


def _next(request: web.Request, value: str = "") -> str:
    """Where to go after logging in: a path on this console only (no open redirect)."""
    target = value or request.query.get("next", "") or "/"
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _message(exc: Exception) -> str:
    """What a page shows for a failure: the broker's words led by Kafka's error name
    (``TOPIC_AUTHORIZATION_FAILED: Topic authorization failed.``), or the parse error."""
    if not isinstance(exc, KafkaClientError):
        return str(exc)
    try:
        name = ErrorCode(exc.code).name
    except ValueError:
        return exc.message
    if name in exc.message or exc.code == ErrorCode.UNKNOWN_SERVER_ERROR:
        return exc.message
    return f"{name}: {exc.message}"


def _series_json(series: Any) -> dict[str, list[float]]:
    t, v = series.as_lists()
    return {"t": t, "v": v}


def _notice(request: web.Request) -> dict[str, str]:
    return {
        k: v
        for k, v in request.query.items()
        if k in ("created", "configs", "produced", "reset", "deleted")
    }


def _int_field(form: Any, field: str, label: str, default: int) -> int:
    raw = str(form.get(field, "")).strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{label} must be an integer, got {raw!r}") from None


def _query_int(query: Any, name: str, default: int | None) -> int | None:
    raw = str(query.get(name, "")).strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"Invalid {name} {raw!r}: expected an integer") from None


def _parse_time(raw: str) -> int | None:
    """Epoch milliseconds, or an ISO 8601 time (UTC unless it says otherwise)."""
    raw = raw.strip()
    if not raw:
        return None
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"Invalid timestamp {raw!r}: use ISO 8601 (2024-01-31T12:00:00Z) or epoch ms"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _config_lines(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"Invalid config {line!r}: expected name=value")
        out[name.strip()] = value.strip()
    return out


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Time every page; a cluster that cannot be reached is an error page, not a 500 trace."""
    request["started"] = time.perf_counter()
    pages: Pages = request.app[SERVICE_KEY]  # type: ignore[assignment]
    if pages.service.security_enabled and not request.path.startswith(OPEN_PATHS):
        pool = pages.service.client_pool()
        session = pool.session(request.cookies.get(COOKIE))
        if session is None:
            if request.path.startswith("/api/") or request.headers.get("X-Console-Live"):
                raise web.HTTPUnauthorized(text="log in first")
            if request.method != "GET":
                raise web.HTTPSeeOther("/login")
            raise web.HTTPSeeOther("/login?" + urlencode({"next": request.path_qs}))
        request[SESSION_KEY] = session
    try:
        return await handler(request)
    except KafkaClientError as exc:
        return pages.error_page(request, _message(exc), 502)


def build_app(service: ConsoleService) -> web.Application:
    pages = Pages(service)
    app = web.Application(middlewares=[_errors], client_max_size=2 * 1024 * 1024)
    app[SERVICE_KEY] = pages
    app.add_routes(
        [
            web.get("/login", pages.login_form),
            web.post("/login", pages.login),
            web.post("/logout", pages.logout),
            web.get("/", pages.overview),
            web.get("/topics", pages.topics),
            web.get("/topics/new", pages.new_topic),
            web.post("/topics", pages.create_topic),
            web.get("/topics/{topic}", pages.topic),
            web.post("/topics/{topic}/configs", pages.alter_configs),
            web.post("/topics/{topic}/delete", pages.delete_topic),
            web.get("/topics/{topic}/messages", pages.messages),
            web.post("/topics/{topic}/messages", pages.produce),
            web.get("/groups", pages.groups),
            web.get("/groups/{group}", pages.group),
            web.post("/groups/{group}/reset", pages.reset_offsets),
            web.get("/api/series/cluster", pages.cluster_series),
            web.get("/api/series/groups/{group}", pages.group_series),
            web.static("/static", HERE / "static"),
        ]
    )
    return app
