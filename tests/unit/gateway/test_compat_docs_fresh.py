"""The API table of docs/compatibility.md matches what the gateway serves: ``make docs``."""

from __future__ import annotations

from odradek.gateway import compat_docs


def test_compatibility_page_api_table_is_current() -> None:
    page = compat_docs.DOC_PATH.read_text()
    assert compat_docs.generated_part(page) == compat_docs.generated_part(
        compat_docs.update(page, compat_docs.render())
    ), "docs/compatibility.md is stale: run make docs"
