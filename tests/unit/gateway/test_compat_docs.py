"""The API table of docs/compatibility.md matches what the gateway serves: ``make docs``."""

from __future__ import annotations

import re

from odradek.gateway import compat_docs


def test_compatibility_page_api_table_is_current() -> None:
    page = compat_docs.DOC_PATH.read_text()
    assert compat_docs.generated_part(page) == compat_docs.generated_part(
        compat_docs.update(page, compat_docs.render())
    ), "docs/compatibility.md is stale: run make docs"


def test_docstrings_state_the_advertised_versions() -> None:
    # Each API module opens with "Name (key N), versions a-b." as franz-go's kfake does;
    # the page is built from those docstrings, so they must agree with what is advertised.
    for api in compat_docs.served_apis():
        first = api.doc.splitlines()[0]
        low, high = api.advertised
        stated = f"versions {low}-{high}" if low != high else f"version {low}"
        assert f"(key {int(api.key)})" in first, (api.module, first)
        assert stated in first or f"versions {low}-{high}" in first, (api.module, first)


def test_every_test_a_trap_cites_exists() -> None:
    # The traps cite tests as `dir/file.py::test_name` (or `::test_name`, same file as the
    # citation before): each must name a test that exists, so citations cannot rot.
    page = compat_docs.DOC_PATH.read_text()
    traps = page[page.index("## Client traps") :]
    tests = compat_docs.REPO / "tests"
    current = None
    cited = re.finditer(
        r"`((?:unit|integration|compat|pipeline|console|deploy)/[\w/]+\.py)?::(\w+)`", traps
    )
    for match in cited:
        current = match.group(1) or current
        assert current is not None, match.group(0)
        path = tests / current
        assert path.exists(), current
        assert re.search(rf"def {match.group(2)}\b", path.read_text()), match.group(0)
