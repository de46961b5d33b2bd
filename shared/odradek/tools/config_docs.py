"""Write ``docs/configuration.md`` from the settings catalog (``make docs``).

``python -m odradek.tools.config_docs`` rewrites the page; ``--check`` only compares
and exits 1 when the committed page is stale (a unit test does the same). The page
lists every setting of :mod:`odradek.config_catalog` with its default, type, valid
values, the services that read it and its one-line description.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from odradek.config_catalog.definition import Catalog, ConfigDef, ConfigType
from odradek.config_catalog.index import CATALOGS

REPO = Path(__file__).resolve().parents[3]
DOC_PATH = REPO / "docs" / "configuration.md"

INTRO = """\
# Configuration

<!-- Generated from odradek.config_catalog by `make docs`; do not edit by hand. -->

Every service reads a flat map of settings named as in Kafka where Kafka has a setting
of that name (*Odradek* in the Name column marks our own). Sources, later ones winning:
the service's defaults below; a file given with `--config` (Java properties or YAML);
environment variables `ODRADEK_<NAME>` (upper case, dots as underscores:
`ODRADEK_LOG_DIRS` is `log.dirs`); `--set name=value` on the command line
(`odradek up --set name=value` passes one to every service). A bad value stops the
service at start-up with Kafka's wording (`Invalid value ... for configuration ...`).

Defaults follow Apache Kafka 4.0 except where a note says otherwise
(`tests/unit/test_config_catalog.py` pins them).
"""

_TYPE_NAMES = {
    ConfigType.BOOLEAN: "boolean",
    ConfigType.STRING: "string",
    ConfigType.INT: "int",
    ConfigType.SHORT: "short",
    ConfigType.LONG: "long",
    ConfigType.DOUBLE: "double",
    ConfigType.LIST: "list",
    ConfigType.CLASS: "class",
    ConfigType.PASSWORD: "password",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(d: ConfigDef) -> str:
    text = d.default_text
    if text is None:
        return "null"
    return f"`{text}`" if text else '`""`'


def _description(d: ConfigDef) -> str:
    parts = [d.doc]
    if d.synonyms:
        parts.append(f"Server default: `{d.synonyms[0].name}`.")
    if d.dynamic:
        parts.append("Dynamic (cluster-wide).")
    if d.note:
        parts.append(f"*Note:* {d.note}")
    return " ".join(parts)


def _row(d: ConfigDef) -> str:
    name = f"`{d.name}`" + ("" if d.kafka else " *Odradek*")
    cells = (
        name,
        _default(d),
        _TYPE_NAMES.get(d.type, d.type.name.lower()),
        d.valid_values,
        ", ".join(d.readers),
        _description(d),
    )
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _section(catalog: Catalog) -> str:
    lines = [
        f"## {catalog.title}",
        "",
        catalog.description,
        "",
        "| Name | Default | Type | Valid values | Read by | Description |",
        "|---|---|---|---|---|---|",
    ]
    lines += [_row(d) for d in catalog.values()]
    return "\n".join(lines) + "\n"


def render(catalogs: Sequence[Catalog] = CATALOGS) -> str:
    """The whole page."""
    return "\n".join([INTRO, *(_section(c) for c in catalogs)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m odradek.tools.config_docs", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--output", type=Path, default=DOC_PATH, help="where to write the page")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the page is stale instead of writing it"
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run make docs", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
