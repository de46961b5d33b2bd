"""The committed docs/configuration.md matches the settings catalog: ``make docs`` when this fails."""

from __future__ import annotations

from pathlib import Path

from odradek.config_catalog.index import CATALOGS
from odradek.tools import config_docs


def test_configuration_page_is_current() -> None:
    committed = config_docs.DOC_PATH.read_text()
    assert committed == config_docs.render(), "docs/configuration.md is stale: run make docs"


def test_page_lists_every_setting_of_every_catalog() -> None:
    page = config_docs.render()
    for catalog in CATALOGS:
        assert f"## {catalog.title}\n" in page
        for name in catalog:
            assert f"| `{name}`" in page, name


def test_check_mode_reports_a_stale_page(tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    assert config_docs.main(["--output", str(page), "--check"]) == 1
    assert config_docs.main(["--output", str(page)]) == 0
    assert config_docs.main(["--output", str(page), "--check"]) == 0
    page.write_text(page.read_text().replace("`1073741824`", "`1`"))
    assert config_docs.main(["--output", str(page), "--check"]) == 1
