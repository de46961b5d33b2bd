"""One setting's definition (Kafka's ``ConfigDef.ConfigKey``) and a catalog of them.

A :class:`ConfigDef` holds a setting's Kafka name, type, default, valid range and a
one-line description, which services read it, whether it may change at run time, and
whether Kafka has a setting of that name. A :class:`Catalog` is one area's settings
(topic configs, cluster-wide broker configs, one service's own settings); code takes
defaults from it (``TOPIC_CONFIGS.int("segment.bytes")``) instead of writing numbers
again, and ``docs/configuration.md`` is generated from it.

Parsing and validation follow Kafka's ``ConfigDef``: the same type names, range
checks and INVALID_CONFIG messages (``Invalid value X for configuration Y: ...``).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from enum import IntEnum

from odradek.config import Config

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

TypedValue = int | float | bool | str | list[str]


class InvalidConfigError(ValueError):
    """A config name or value Kafka would reject (Kafka: INVALID_CONFIG)."""

    kafka_error = "INVALID_CONFIG"

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


class ConfigType(IntEnum):
    """DescribeConfigs v3+ ``config_type`` values."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True)
class BrokerSynonym:
    """A broker config that sets the topic default; ``scale`` converts its unit to the topic's."""

    name: str
    scale: int = 1


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: TypedValue | None  # None: unset unless configured (Kafka's null default)
    doc: str
    synonyms: tuple[BrokerSynonym, ...] = ()
    at_least: float | None = None
    at_most: float | None = None
    one_of: tuple[str, ...] | None = None  # exact (case-sensitive) allowed strings
    case_insensitive: bool = False
    # The broker config (and its own default) that Kafka lists as the DEFAULT_CONFIG synonym.
    default_synonym: tuple[str, str] | None = None
    dynamic: bool = False  # may be altered at run time (cluster-wide, via AlterConfigs)
    readers: tuple[str, ...] = ()  # services that read it (empty: the catalog's readers)
    kafka: bool = True  # Kafka has a setting of this name (False: Odradek's own)
    note: str = ""  # where the default differs from Kafka's, and why

    def parse(self, raw: object) -> TypedValue:
        """Turn a string (or an already typed value) into the typed value, validating it."""
        value = _parse_type(self, raw)
        _validate(self, value, raw)
        return value

    @property
    def default_text(self) -> str | None:
        """The default in Kafka's string form (what DescribeConfigs shows), None if unset."""
        return None if self.default is None else to_config_string(self.default)

    @property
    def valid_values(self) -> str:
        """The range in the words of Kafka's config docs (``[1,...]``, ``[0.0,...,1.0]``)."""
        if self.one_of is not None:
            return "[" + ", ".join(self.one_of) + "]"
        if self.at_least is None and self.at_most is None:
            return ""
        low = "" if self.at_least is None else _bound(self, self.at_least)
        high = "" if self.at_most is None else _bound(self, self.at_most)
        if self.at_most is None:
            return f"[{low},...]"
        if self.at_least is None:
            return f"[...,{high}]"
        return f"[{low},...,{high}]"


def to_config_string(value: object) -> str:
    """Kafka's string form of a value (lists comma-joined, booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(x) for x in value)
    return str(value)


def _fail(cfg: ConfigDef, raw: object, reason: str) -> InvalidConfigError:
    return InvalidConfigError(
        cfg.name, f"Invalid value {to_config_string(raw)} for configuration {cfg.name}: {reason}"
    )


def _parse_type(cfg: ConfigDef, raw: object) -> TypedValue:
    t = cfg.type
    if t in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        if isinstance(raw, bool):
            raise _fail(cfg, raw, f"Not a number of type {t.name}")
        if isinstance(raw, int):
            number = raw
        else:
            text = str(raw).strip()
            try:
                number = int(text, 10)
            except ValueError:
                raise _fail(cfg, raw, f"Not a number of type {t.name}") from None
        limit = {ConfigType.INT: 31, ConfigType.LONG: 63, ConfigType.SHORT: 15}[t]
        if not -(1 << limit) <= number < (1 << limit):
            raise _fail(cfg, raw, f"Not a number of type {t.name}")
        return number
    if t is ConfigType.DOUBLE:
        if isinstance(raw, bool):
            raise _fail(cfg, raw, "Not a number of type DOUBLE")
        try:
            d = float(str(raw).strip()) if not isinstance(raw, (int, float)) else float(raw)
        except ValueError:
            raise _fail(cfg, raw, "Not a number of type DOUBLE") from None
        if math.isnan(d):
            raise _fail(cfg, raw, "Not a number of type DOUBLE")
        return d
    if t is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text == "true":
            return True
        if text == "false":
            return False
        raise _fail(cfg, raw, "Expected value to be either true or false")
    if t is ConfigType.LIST:
        if isinstance(raw, (list, tuple)):
            return [str(x).strip() for x in raw]
        text = str(raw).strip()
        return [] if not text else [part.strip() for part in text.split(",")]
    return str(raw).strip()


def _validate(cfg: ConfigDef, value: TypedValue, raw: object) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if cfg.at_least is not None and value < cfg.at_least:
            shown = _bound(cfg, cfg.at_least)
            raise _fail(cfg, raw, f"Value must be at least {shown}")
        if cfg.at_most is not None and value > cfg.at_most:
            shown = _bound(cfg, cfg.at_most)
            raise _fail(cfg, raw, f"Value must be no more than {shown}")
    if cfg.one_of is not None:
        items = value if isinstance(value, list) else [str(value)]
        allowed = cfg.one_of
        for item in items:
            ok = (
                item.lower() in {a.lower() for a in allowed}
                if cfg.case_insensitive
                else item in allowed
            )
            if not ok:
                raise _fail(cfg, raw, f"String must be one of: {', '.join(allowed)}")


def _bound(cfg: ConfigDef, bound: float) -> str:
    return str(float(bound)) if cfg.type is ConfigType.DOUBLE else str(int(bound))


class Catalog(Mapping[builtins.str, ConfigDef]):
    """One area's settings by name, in the order written; typed access to their defaults.

    ``readers`` name the services that read the area's settings unless a setting names
    its own. The typed getters fail at import time if a default has the wrong type, so a
    dataclass field ``segment_bytes: int = TOPIC_CONFIGS.int("segment.bytes")`` is safe.
    """

    def __init__(
        self,
        title: builtins.str,
        description: builtins.str,
        readers: tuple[builtins.str, ...],
        defs: Iterable[ConfigDef],
    ) -> None:
        self.title = title
        self.description = description
        self._defs: dict[builtins.str, ConfigDef] = {}
        for d in defs:
            if d.name in self._defs:
                raise ValueError(f"{title}: {d.name} defined twice")
            self._defs[d.name] = d if d.readers else replace(d, readers=readers)

    def __getitem__(self, name: builtins.str) -> ConfigDef:
        return self._defs[name]

    def __iter__(self) -> Iterator[builtins.str]:
        return iter(self._defs)

    def __len__(self) -> builtins.int:
        return len(self._defs)

    # -- typed defaults -------------------------------------------------------------------
    def value(self, name: builtins.str) -> TypedValue:
        """The default of a setting that has one."""
        value = self._defs[name].default
        if value is None:
            raise TypeError(f"{name} has no default")
        return value

    def int(self, name: builtins.str) -> builtins.int:
        value = self._defs[name].default
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name}: default {value!r} is not an integer")
        return value

    def float(self, name: builtins.str) -> builtins.float:
        value = self._defs[name].default
        if not isinstance(value, float):
            raise TypeError(f"{name}: default {value!r} is not a number")
        return value

    def bool(self, name: builtins.str) -> builtins.bool:
        value = self._defs[name].default
        if not isinstance(value, bool):
            raise TypeError(f"{name}: default {value!r} is not a boolean")
        return value

    def str(self, name: builtins.str) -> builtins.str:
        value = self._defs[name].default
        if not isinstance(value, str):
            raise TypeError(f"{name}: default {value!r} is not a string")
        return value

    def strings(self, name: builtins.str) -> tuple[builtins.str, ...]:
        value = self._defs[name].default
        if not isinstance(value, list):
            raise TypeError(f"{name}: default {value!r} is not a list")
        return tuple(value)

    def text(self, name: builtins.str) -> builtins.str:
        """The default in Kafka's string form (for ``name -> string`` config maps)."""
        value = self._defs[name].default_text
        if value is None:
            raise TypeError(f"{name} has no default")
        return value

    def defaults(self) -> dict[builtins.str, builtins.str]:
        """Every setting that has a default, in Kafka's string form (a service's start-up map)."""
        return {n: d.default_text for n, d in self._defs.items() if d.default_text is not None}

    # -- reading a service's config -------------------------------------------------------
    def read_int(self, config: Config, name: builtins.str) -> builtins.int:
        """``name`` from ``config`` as an integer, at least the catalogued lower bound."""
        d = self._defs[name]
        default = self.int(name) if d.default is not None else None
        low = None if d.at_least is None else int(d.at_least)
        return config.int(name, default, min=low)

    def read_bool(self, config: Config, name: builtins.str) -> builtins.bool:
        default = self.bool(name) if self._defs[name].default is not None else None
        return config.bool(name, default)

    def read_str(self, config: Config, name: builtins.str) -> builtins.str:
        default = self.str(name) if self._defs[name].default is not None else None
        return config.str(name, default)
