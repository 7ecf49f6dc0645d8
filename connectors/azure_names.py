"""The cost type an Azure export's own names say (`DailyAmortizedCost/…`, a folder `amortized`):
what `cost_type: auto` falls back on where the rows tell none (connectors/azure_cost.py)."""

from __future__ import annotations

import re

# a name's words: split at separators, digits and a capital after a small letter (DailyAmortizedCost)
NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
# a word naming the cost type, alone or in the compounds of Azure's datasets and export names written
# in one case (`amortizedcost`, `dailyamortizedcost`, `MONTHLYACTUALCOST`); `factual` is none
COST_TYPE_WORD = re.compile(r"(?:daily|weekly|monthly|annually)?(actual|amorti[sz]ed)(?:costs?)?", re.IGNORECASE)


def named_cost_type(location: str, uri: str) -> str | None:
    """The cost type the export's own names say, where its rows tell none (a month of on-demand
    usage only): `amortized` or `actual` in the location's folder name or a folder or file name
    below it (Azure writes `<export name>/<date range>/<export name>_<id>.csv`: `DailyAmortizedCost`),
    as a whole word of the name or of Azure's compounds in one case (`dailyamortizedcost`; `factual`,
    `nonactual` say nothing); None when neither word or both are there."""
    location = location.rstrip("/")
    below = uri[len(location):] if uri.startswith(location + "/") else "/" + uri.rsplit("/", 1)[-1]
    words = NAME_WORDS.findall(location.rsplit("/", 1)[-1] + below)
    found = {"actual" if named.group(1).lower() == "actual" else "amortized"
             for named in map(COST_TYPE_WORD.fullmatch, words) if named}
    return found.pop() if len(found) == 1 else None
