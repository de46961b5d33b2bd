"""Service configuration with Kafka's names: defaults < file < environment < command line.

Every service reads a flat ``name -> string`` map keyed by Kafka's config names
(``log.dirs``, ``num.partitions``, ``socket.request.max.bytes``...). Sources, later
ones winning:

1. the defaults the service declares;
2. a file given with ``--config``: Java properties (``key=value``) or YAML (a flat
   mapping, or nested mappings joined with dots);
3. environment variables ``ODRADEK_<NAME>`` where the name is upper-cased and dots
   become underscores (``ODRADEK_LOG_DIRS`` -> ``log.dirs``);
4. ``--set name=value`` on the command line.

Typed access raises :class:`ConfigError` naming the key, the value and the source, so
a bad setting fails at start-up the way Kafka's ``ConfigException`` does.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ENV_PREFIX = "ODRADEK_"


class ConfigError(ValueError):
    """An invalid or missing configuration value (Kafka: INVALID_CONFIG)."""

    kafka_error = "INVALID_CONFIG"


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties``: ``key=value`` or ``key: value``, ``#``/``!`` comments."""
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                out[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            out[line] = ""
    return out


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list):
        out[prefix] = ",".join(str(v) for v in value)
    elif isinstance(value, bool):
        out[prefix] = "true" if value else "false"
    elif value is None:
        out[prefix] = ""
    else:
        out[prefix] = str(value)


def load_file(path: str | Path) -> dict[str, str]:
    p = Path(path)
    text = p.read_text()
    if p.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text) or {}
        if not isinstance(data, Mapping):
            raise ConfigError(f"{p}: expected a mapping at the top level")
        out: dict[str, str] = {}
        _flatten("", data, out)
        return out
    return parse_properties(text)


def from_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    out = {}
    for key, value in env.items():
        if key.startswith(ENV_PREFIX) and len(key) > len(ENV_PREFIX):
            out[key[len(ENV_PREFIX) :].lower().replace("_", ".")] = value
    return out


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects name=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


class Config:
    """An immutable-by-convention view over the merged settings with typed getters."""

    def __init__(
        self,
        defaults: Mapping[str, str] | None = None,
        *,
        file: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        self._values: dict[str, str] = {}
        self._sources: dict[str, str] = {}
        for source, values in (
            ("default", dict(defaults or {})),
            (f"file {file}" if file else "file", load_file(file) if file else {}),
            ("environment", from_environment(environ)),
            ("command line", dict(overrides or {})),
        ):
            for k, v in values.items():
                self._values[k] = v
                self._sources[k] = source

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def items(self) -> Iterable[tuple[str, str]]:
        return self._values.items()

    def as_dict(self) -> dict[str, str]:
        return dict(self._values)

    def source(self, name: builtins.str) -> builtins.str:
        return self._sources.get(name, "unset")

    def _fail(self, name: builtins.str, value: builtins.str, why: builtins.str) -> ConfigError:
        return ConfigError(
            f"Invalid value {value!r} for configuration {name} ({self.source(name)}): {why}"
        )

    def get(self, name: builtins.str, default: builtins.str | None = None) -> builtins.str | None:
        return self._values.get(name, default)

    def str(self, name: builtins.str, default: builtins.str | None = None) -> builtins.str:
        value = self._values.get(name, default)
        if value is None:
            raise ConfigError(f"Missing required configuration {name}")
        return value

    def int(
        self,
        name: builtins.str,
        default: builtins.int | None = None,
        *,
        min: builtins.int | None = None,
    ) -> builtins.int:
        raw = self._values.get(name)
        if raw is None or raw == "":
            if default is None:
                raise ConfigError(f"Missing required configuration {name}")
            return default
        try:
            value = int(raw)
        except ValueError:
            raise self._fail(name, raw, "not an integer") from None
        if min is not None and value < min:
            raise self._fail(name, raw, f"value must be at least {min}")
        return value

    def float(self, name: builtins.str, default: builtins.float | None = None) -> builtins.float:
        raw = self._values.get(name)
        if raw is None or raw == "":
            if default is None:
                raise ConfigError(f"Missing required configuration {name}")
            return default
        try:
            return float(raw)
        except ValueError:
            raise self._fail(name, raw, "not a number") from None

    def bool(self, name: builtins.str, default: builtins.bool | None = None) -> builtins.bool:
        raw = self._values.get(name)
        if raw is None or raw == "":
            if default is None:
                raise ConfigError(f"Missing required configuration {name}")
            return default
        low = raw.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise self._fail(name, raw, "expected true or false")

    def list(
        self, name: builtins.str, default: builtins.list[builtins.str] | None = None
    ) -> builtins.list[builtins.str]:
        raw = self._values.get(name)
        if raw is None:
            return list(default or [])
        return [part.strip() for part in raw.split(",") if part.strip()]
