"""A synthetic but plausible web site's traffic, one access-log entry at a time.

Clients follow a Zipf-like popularity (a few heavy hitters, a long tail, some
crawlers); the site has pages, an API, static assets and the usual probes for
``/wp-login.php``; statuses and sizes depend on the endpoint (304s for cached
assets, 404s for probes, occasional 5xx from the API). Seeded, so a run is
reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from itertools import accumulate

from odradek.pipeline.logformat import AccessLogEntry

BROWSERS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.4 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like "
    "Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Mobile Safari/537.36",
)
BOTS = (
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "curl/8.5.0",
    "python-requests/2.31.0",
)
REFERERS = (
    "-",
    "https://www.google.com/",
    "https://shop.example.com/",
    "https://shop.example.com/catalog?page=2",
    "https://news.ycombinator.com/",
)


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # "{id}" is filled with a number
    weight: int
    size: tuple[int, int]  # bytes range of a 200
    statuses: tuple[tuple[int, int], ...]  # (status, weight)
    query: tuple[str, ...] = ("",)


ENDPOINTS = (
    Endpoint("GET", "/", 120, (6_000, 9_000), ((200, 95), (304, 5))),
    Endpoint(
        "GET",
        "/catalog",
        60,
        (12_000, 30_000),
        ((200, 97), (500, 1), (304, 2)),
        ("", "?page=2", "?page=3&sort=price"),
    ),
    Endpoint("GET", "/product/{id}", 90, (8_000, 20_000), ((200, 90), (404, 8), (304, 2))),
    Endpoint(
        "GET",
        "/api/v1/items",
        80,
        (500, 5_000),
        ((200, 96), (500, 2), (502, 1), (429, 1)),
        ("", "?limit=20", "?limit=100&offset=200"),
    ),
    Endpoint("GET", "/api/v1/items/{id}", 70, (300, 2_000), ((200, 92), (404, 6), (500, 2))),
    Endpoint("POST", "/api/v1/cart", 25, (50, 400), ((201, 90), (400, 6), (401, 3), (500, 1))),
    Endpoint("POST", "/api/v1/orders", 10, (80, 600), ((201, 85), (400, 5), (402, 5), (503, 5))),
    Endpoint("GET", "/static/app.js", 70, (180_000, 180_000), ((200, 40), (304, 60))),
    Endpoint("GET", "/static/app.css", 60, (42_000, 42_000), ((200, 40), (304, 60))),
    Endpoint("GET", "/favicon.ico", 30, (1_150, 1_150), ((200, 70), (304, 30))),
    Endpoint("POST", "/login", 12, (0, 300), ((302, 80), (401, 20))),
    Endpoint("GET", "/healthz", 20, (2, 2), ((200, 100),)),
    Endpoint("GET", "/robots.txt", 6, (68, 68), ((200, 100),)),
    Endpoint("GET", "/wp-login.php", 5, (150, 150), ((404, 100),)),
    Endpoint("GET", "/.env", 3, (150, 150), ((404, 100),)),
)


def _cum(weights: list[int]) -> list[int]:
    return list(accumulate(weights))


class TrafficModel:
    def __init__(self, seed: int = 0, clients: int = 500) -> None:
        self._rng = random.Random(seed)
        rng = self._rng
        self.clients = [self._address(i) for i in range(clients)]
        # Zipf-like: client i is 1/(i+1) as popular as the first.
        self._client_cum = list(accumulate(1.0 / (i + 1) for i in range(clients)))
        self._bots = {c for c in self.clients if rng.random() < 0.05}
        self._agent = {
            c: rng.choice(BOTS) if c in self._bots else rng.choice(BROWSERS) for c in self.clients
        }
        self._endpoint_cum = _cum([e.weight for e in ENDPOINTS])
        self._status_cum = [_cum([w for _, w in e.statuses]) for e in ENDPOINTS]

    def _address(self, i: int) -> str:
        r = self._rng
        if i % 25 == 24:
            return f"2001:db8:{r.randrange(1 << 16):x}::{r.randrange(1 << 16):x}"
        if i % 10 == 9:
            return f"10.{r.randrange(256)}.{r.randrange(256)}.{r.randrange(1, 255)}"
        return f"{r.choice((198, 203, 192, 100, 185))}.{r.randrange(256)}.{r.randrange(256)}.{r.randrange(1, 255)}"

    def entry(self, t: datetime) -> AccessLogEntry:
        r = self._rng
        client = r.choices(self.clients, cum_weights=self._client_cum)[0]
        idx = r.choices(range(len(ENDPOINTS)), cum_weights=self._endpoint_cum)[0]
        ep = ENDPOINTS[idx]
        status = r.choices(ep.statuses, cum_weights=self._status_cum[idx])[0][0]
        path = ep.path.replace("{id}", str(r.randrange(1, 5000)))
        uri = path + r.choice(ep.query)
        if status == 304:
            size = 0
        elif status >= 400:
            size = r.randrange(150, 600)
        else:
            size = r.randint(*ep.size)
        return AccessLogEntry(
            remote_addr=client,
            time=t,
            method=ep.method,
            uri=uri,
            status=status,
            body_bytes_sent=size,
            referer="-" if client in self._bots else r.choice(REFERERS),
            user_agent=self._agent[client],
            remote_user="-",
        )
