"""The config sections whose entries are checked by models their plugins declare: each
source's and inventory source's settings by its connector kind's model (`by_kind`), each
rule's by the rule's (`by_rule`), errors keeping their dotted paths. The registry is
imported only when a config has such a section (service.core.registry loads plugins)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from service.core.config_base import Strict
from service.core.suggest import suggestion
from service.core.validation import keys_at


def by_kind(section: str, items: Any, base: type[Strict], billing: bool) -> tuple:
    """Each entry of `section` validated by the config model its kind's connector declares
    (service.core.registry), errors keeping their dotted paths (`sources[1].report_name`), every
    error of the list at once: an entry of an unknown kind has the settings every kind takes
    checked too (its name, its location), and a name used twice is said at its entry."""
    from pydantic_core import ValidationError as CoreValidationError

    from service.core.registry import CONNECTORS, PluginError

    models, errors, names = [], [], set()
    for index, item in enumerate(items):
        kind = item.get("kind") if isinstance(item, dict) else None
        name = item.get("name") if isinstance(item, dict) else None
        if isinstance(name, str) and name in names:
            errors.append(item_error(index, ("name",), f"{'' if billing else 'inventory '}source name {name!r} is used "
                                     "twice; names must be unique", name))
        if isinstance(name, str):
            names.add(name)
        model: type[Strict] = base
        known = True  # the kind's own model checks the entry; else only what every kind takes
        if isinstance(kind, str):
            try:
                connector = CONNECTORS.get(kind)
            except PluginError as exc:
                errors.append(item_error(index, ("kind",), unknown_kind(kind, billing) or exc.message, kind))
                known = False
            else:
                if (connector.feeds.tables == ("costs",)) != billing:
                    other = "inventory" if billing else "sources"
                    what = "a billing" if billing else "an inventory"
                    errors.append(item_error(index, ("kind",), f"{kind!r} is not {what} kind; put it under `{other}:`",
                                             kind))
                    known = False
                else:
                    model = connector.config_model
        try:
            models.append(model.model_validate(item))
        except ValidationError as exc:
            for e in exc.errors():
                if not known and (e["type"] == "extra_forbidden" or e["loc"][:1] == ("kind",)):
                    continue  # a key of the kind meant, or the kind itself: said above
                if e["type"] == "extra_forbidden" and len(e["loc"]) == 1 and isinstance(kind, str):
                    takes = suggestion(str(e["loc"][0]), model.model_fields, "keys")
                    errors.append(item_error(index, e["loc"], f"kind {kind} takes no such key; {takes}", e["input"]))
                else:
                    errors.append({"type": e["type"], "loc": (index, *e["loc"]), "input": e["input"],
                                   "ctx": e.get("ctx") or {}})
    if errors:
        raise CoreValidationError.from_exception_data(section, errors)
    return tuple(models)


def unknown_kind(kind: str, billing: bool) -> str | None:
    """A kind no package provides, with the installed kinds valid in this section (billing
    kinds under `sources:`, inventory kinds under `inventory:`); None when it is installed
    but failed to load (its own error says why)."""
    from service.core.registry import CONNECTORS

    if kind in CONNECTORS.names():
        return None
    loaded, _ = CONNECTORS.load_all()
    known = [name for name, connector in loaded.items() if (connector.feeds.tables == ("costs",)) == billing]
    return (f"no {'billing' if billing else 'inventory'} connector kind {kind!r} is installed; "
            f"known: {', '.join(known) or 'none'}")


def by_rule(sections: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each rule's settings checked with the config model the rule declares (the registry),
    so a misspelt rule or setting is found with the rest of the config, by every command;
    the settings stay as written for rules.base.configure."""
    from pydantic_core import ValidationError as CoreValidationError

    from service.core.registry import RULES, PluginError

    errors = []
    for name, section in sections.items():
        try:
            rule = RULES.get(name)
        except PluginError as exc:
            known = RULES.names()
            message = exc.message if name in known else f"unknown rule; {suggestion(name, known, 'rules')}"
            errors.append(item_error(name, (), message, name))
            continue
        try:
            rule.config_model.model_validate(section)
        except ValidationError as exc:
            for e in exc.errors():
                # at any depth (a rule's `prices.per_gib_month`...), the keys its model takes there
                keys = keys_at(rule.config_model, e["loc"][:-1]) if e["type"] == "extra_forbidden" else []
                if keys:
                    takes = suggestion(str(e["loc"][-1]), keys, "keys")
                    errors.append(item_error(name, e["loc"], f"unknown key; {takes} (documented in "
                                                         f"{rule.__module__.replace('.', '/')}.py)", e["input"]))
                else:
                    errors.append({"type": e["type"], "loc": (name, *e["loc"]), "input": e["input"],
                                   "ctx": e.get("ctx") or {}})
    if errors:
        raise CoreValidationError.from_exception_data("rules", errors)
    return sections


def item_error(index: int | str, loc: tuple, message: str, value: Any) -> dict:
    return {"type": "value_error", "loc": (index, *loc), "input": value, "ctx": {"error": ValueError(message)}}
