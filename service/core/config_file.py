"""Reading the config file: where it is looked for, and what a file may hold before its
settings are validated (service.core.config).

- Looked for at `--config PATH`, else `$SPENDLAKE_CONFIG`, else `./spendlake.yaml`; none
  found is a ConfigError naming the three places (a command never answers from defaults
  it was not told about).
- At most MAX_CONFIG_BYTES (10 MB): a config is a page of settings, not a data file.
- YAML 1.2 booleans and unique keys: a second `sources:` (or any key repeated in one
  mapping) is an error with both lines, never a silent replacement of the first.
- A number YAML would round (a float holds ~16 digits: `amount: 1234567890123456789.12`
  reads as 1.2345678901234568e18) is an error with its line, saying to quote it: money is
  exact, and a quoted number reaches the Decimal settings digit for digit.
- Every list or mapping holds at most MAX_ITEMS entries, and the whole file at most
  MAX_VALUES values once YAML aliases are expanded (an alias bomb stops here, not in
  validation), and nesting stops at MAX_DEPTH levels (an alias inside its own anchor);
  errors carry the dotted path of the offending list.
"""

from __future__ import annotations

import math
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from service.core.errors import ConfigError
from service.core.validation import dotted_path

DEFAULT_CONFIG_FILE = "spendlake.yaml"
MAX_CONFIG_BYTES = 10 * 1024 * 1024
MAX_ITEMS = 1_000  # sources, inventory, budgets, rules, virtual-tag rules, tag keys, weights, ...
MAX_VALUES = 100_000
MAX_DEPTH = 32  # the deepest documented setting is ~6 levels; deeper is an alias that contains itself
LOOKED_AT = f"--config, $SPENDLAKE_CONFIG, ./{DEFAULT_CONFIG_FILE}"
DEMO_CONFIG = Path("spendlake-data", "demo", DEFAULT_CONFIG_FILE)  # where `spendlake demo` writes its config


def find_config(explicit: str | os.PathLike[str] | None) -> Path | None:
    """The config file to read: `explicit`, else $SPENDLAKE_CONFIG, else ./spendlake.yaml if it exists."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("SPENDLAKE_CONFIG")
    if env:
        return Path(env)
    local = Path(DEFAULT_CONFIG_FILE)
    return local if local.exists() else None


def no_config_error() -> ConfigError:
    # the README's first command runs the demo here: its next command without --config lands here
    hint = (f"the demo's is {DEMO_CONFIG}: pass --config {DEMO_CONFIG}, or set $SPENDLAKE_CONFIG to it"
            if DEMO_CONFIG.is_file() else
            f"pass --config PATH, set $SPENDLAKE_CONFIG, or create ./{DEFAULT_CONFIG_FILE} (`spendlake demo` writes an example)")
    return ConfigError(f"no config found (looked at {LOOKED_AT}, which does not exist here)", where="--config",
                       hint=hint)


def read_config_file(path: Path) -> Any:
    """The YAML document of `path`, checked for size and duplicate keys."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        from_env = os.environ.get("SPENDLAKE_CONFIG") == str(path)  # a stale variable is not obvious
        raise ConfigError("config file not found" + (" (named by $SPENDLAKE_CONFIG)" if from_env else ""),
                          where=str(path), hint="point $SPENDLAKE_CONFIG at the config, or unset it" if from_env
                          else "pass --config PATH or set $SPENDLAKE_CONFIG") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the config: {exc.strerror or exc}", where=str(path)) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"the config is larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MB", where=str(path),
                          hint="a config holds settings, not data; is this the right file?")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"the config is not UTF-8 text (byte {exc.start + 1} is 0x{raw[exc.start]:02x})",
                          where=str(path), hint="save it as UTF-8") from None
    try:
        data = yaml.load(text, Loader=ConfigLoader)  # noqa: S506 - a SafeLoader subclass
    except DuplicateKeyError as exc:
        raise ConfigError(str(exc), where=str(path), hint="keep one of them (YAML keeps only the last)") from None
    except InexactNumberError as exc:
        raise ConfigError(str(exc), where=str(path), hint="write it in quotes ('...') to keep every digit, "
                                                          "or write fewer digits") from None
    except yaml.YAMLError as exc:
        raise yaml_error(exc, str(path), text) from None
    if data is None:  # emptied as it is written (a shell's `>`, an editor's save): read, it is another lake
        raise ConfigError("the config holds no settings (the file is empty, or comments only)", where=str(path),
                          hint="write its settings (README's example: lake, sources), or point --config at the "
                               "config; a file being saved reads whole once saved")
    return data


def yaml_error(exc: yaml.YAMLError, where: str, text: str) -> ConfigError:
    """PyYAML's three-line message as one: where (1-based), what, while doing what."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or not problem:
        return ConfigError(f"not valid YAML: {' '.join(str(exc).split())}", where=where)
    context = getattr(exc, "context", None)
    lines = text.splitlines()
    tabs = mark.line < len(lines) and "\t" in lines[mark.line]
    hint = "YAML indents with spaces, not tabs" if tabs else "check the line against the README's example"
    return ConfigError(f"not valid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
                       + (f" ({context})" if context else ""), where=where, hint=hint)


class DuplicateKeyError(yaml.YAMLError):
    pass


class InexactNumberError(yaml.YAMLError):
    pass


class ConfigLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser: ~10x faster
    """PyYAML's safe loader with YAML 1.2 booleans (only true/false: `on:`, a budget's key,
    `yes`, `no` and `off` stay the strings they are written as), refusing a key that appears
    twice in one mapping. Keys merged in with `<<: *anchor` may be overridden, as YAML intends."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                try:
                    key = self.construct_object(key_node, deep=True)
                    hash(key)
                except (TypeError, ConstructorError):
                    continue  # the base constructor reports unhashable keys
                if key in seen:
                    raise DuplicateKeyError(f"key {key!r} appears twice in one mapping: line "
                                            f"{seen[key].start_mark.line + 1} and line {key_node.start_mark.line + 1}")
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        written = node.value.replace("_", "")
        if math.isfinite(value) and ":" not in written and Decimal(repr(value)) != Decimal(written):
            raise InexactNumberError(f"line {node.start_mark.line + 1}: {node.value} has more digits than a YAML "
                                     f"number keeps (it would be read as {value!r})")
        return value


ConfigLoader.add_constructor("tag:yaml.org,2002:float", ConfigLoader.construct_yaml_float)


ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                   list("tTfF"))


def check_sizes(data: Any, file: str) -> None:
    """Every list or mapping in `data` holds at most MAX_ITEMS entries, and `data` at most
    MAX_VALUES values (aliases counted each time they are used)."""
    count = 0
    stack: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        count += 1
        if len(loc) > MAX_DEPTH:
            raise ConfigError(f"{dotted_path(loc[:4])}...: nested deeper than {MAX_DEPTH} levels", where=file,
                              hint="a YAML alias (*name) inside the list or mapping its anchor (&name) marks "
                                   "contains itself; point the alias elsewhere")
        if count > MAX_VALUES:
            raise ConfigError(f"{dotted_path(loc)}: the config holds more than {MAX_VALUES:,} values "
                              "(YAML aliases counted each time they are used)", where=file,
                              hint="a config holds settings, not data; is this the right file?")
        if isinstance(value, (list, tuple, dict)):
            if len(value) > MAX_ITEMS:
                kind = "list" if isinstance(value, (list, tuple)) else "mapping"
                raise ConfigError(f"{dotted_path(loc)}: {len(value):,} entries; a {kind} in the config holds at "
                                  f"most {MAX_ITEMS:,}", where=file, hint="split it over several spendlake configs")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((loc + (key if isinstance(key, (str, int)) else str(key),), item) for key, item in items)
