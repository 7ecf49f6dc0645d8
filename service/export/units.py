"""Units in FOCUS's Unit Format, for the providers' spellings that are not.

FOCUS writes a unit as a name (`GB`, `Requests`), `<unit>-<plural time unit>` (`GB-Months`),
`<unit>/<time unit>` (`GB/Month`), `<quantity> <unit>` (`1000 Requests`) or
`<unit>/<interval> <plural time unit>`. A unit that already reads so is kept. Translated:
AWS's abbreviations (`GB-Mo`, `Obj-Month`, `Hrs`), Azure's blocks (`10K`, `1/Month`,
`1 GB/Month`: the block of 10,000 units and the rates keep their meaning) and words that
name a unit FOCUS spells otherwise (`gibibyte` → `GiB`, `hour` → `Hours`). Anything else is
kept as the bill wrote it.
"""

from __future__ import annotations

import re

TIME_PLURAL = {"year": "Years", "month": "Months", "day": "Days", "hour": "Hours", "minute": "Minutes",
               "second": "Seconds", "mo": "Months", "hr": "Hours", "hrs": "Hours", "min": "Minutes",
               "sec": "Seconds"}
TIME_SINGULAR = {"year": "Year", "month": "Month", "day": "Day", "hour": "Hour", "minute": "Minute",
                 "second": "Second"}
WORDS = {"byte": "B", "bytes": "B", "kilobyte": "KB", "megabyte": "MB", "gigabyte": "GB", "terabyte": "TB",
         "petabyte": "PB", "kibibyte": "KiB", "mebibyte": "MiB", "gibibyte": "GiB", "tebibyte": "TiB",
         "pebibyte": "PiB", "obj": "Objects", "hrs": "Hours", "hr": "Hours", "hour": "Hours", "hours": "Hours",
         "request": "Requests", "requests": "Requests", "count": "Count"}

DATA = "b|Kb|Mb|Gb|Tb|Pb|Eb|B|KB|MB|GB|TB|PB|EB|Kib|Mib|Gib|Tib|Pib|Eib|KiB|MiB|GiB|TiB|PiB|EiB"
SINGULAR = "Year|Month|Day|Hour|Minute|Second"
PLURAL = "Years|Months|Days|Hours|Minutes|Seconds"
COUNT = r"[A-Za-z][A-Za-z0-9]*(?:\s+[A-Za-z][A-Za-z0-9]*)*"
UNIT_FORMAT = re.compile("|".join(f"(?:{p})" for p in (
    f"^(?:{DATA}|{SINGULAR}|{PLURAL}|{COUNT})$",
    f"^(?:{DATA}|{COUNT})-(?:{PLURAL})$",
    f"^(?:{DATA}|{COUNT}|{PLURAL})/(?:{SINGULAR})$",
    f"^[0-9]+ (?:{DATA}|{SINGULAR}|{PLURAL}|{COUNT})$",
    f"^(?:{DATA}|{COUNT}|{PLURAL})/[0-9]+ (?:{PLURAL})$",
)))


def conforms(unit: str) -> bool:
    return bool(UNIT_FORMAT.match(unit))


def focus_unit(unit: str | None) -> str | None:
    """`unit` in FOCUS Unit Format where a translation is known, else `unit` itself."""
    if unit is None:
        return None
    text = unit.strip()
    translated = _translate(text)
    if translated and conforms(translated) and (not conforms(text) or _is_word(text)):
        return translated
    return unit


def _is_word(text: str) -> bool:
    return text.lower() in WORDS or " " in text and all(w.lower() in WORDS or w.lower() in TIME_SINGULAR
                                                          for w in text.split())


def _translate(text: str) -> str | None:
    if match := re.fullmatch(r"(\d+)K", text):  # Azure: a block of thousands
        return f"{int(match[1]) * 1000} Units"
    if match := re.fullmatch(r"1\s*/\s*(\w+)", text):  # Azure: one per time unit
        time = TIME_SINGULAR.get(match[1].lower())
        return time and f"Units/{time}"
    if match := re.fullmatch(r"1 (\S+)/(\w+)", text):  # Azure: `1 GB/Month`
        time = TIME_SINGULAR.get(match[2].lower())
        return time and f"{match[1]}/{time}"
    if match := re.fullmatch(r"(.+?)[- ](Mo|Month|Months|Hr|Hrs|Hour|Hours|Day|Days|Second|Seconds)", text,
                             re.IGNORECASE):  # AWS `GB-Mo`, GCP `gibibyte month`
        base = WORDS.get(match[1].lower(), match[1])
        return f"{base}-{TIME_PLURAL.get(match[2].lower().rstrip('s'), TIME_PLURAL.get(match[2].lower()))}"
    return WORDS.get(text.lower())
