"""What the API says of the server's own folders: their names, not their paths. An error or a
note that reaches an HTTP client (to anyone who can reach the port, when no token is set)
names the lake as `the lake`, a file in it by its path inside (`the lake's costs/source=aws/...`),
the local folder the reports are served from as `the reports folder`, and a source's local location
(its `location` or `path`) as `source NAME's location` (its other local paths, `lifecycle_path` and
`inventory_manifests`, as `source NAME's lifecycle_path`...): a source's error (`last_error` in
/api/v1/status, a job's) names its files. An `s3://` location is no path of the server's disk, and
token holders read the bill the bucket holds: it is said as it is. The CLI's words and
the service's log keep the paths: the operator reads them there (`serve` says its lake as it
starts; a refusal's full text is logged).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from service.core.config import Config
from service.core.config_paths import LOCAL_PATH_KEYS
from service.core.errors import SpendlakeError
from service.report.write import default_out
from service.serve.http import Response, error_response

log = logging.getLogger(__name__)

LAKE = "the lake"
REPORTS = "the reports folder"


def source_places(config: Config) -> Iterator[tuple[Path | str, str]]:
    """(path, name) of each source's local paths (LOCAL_PATH_KEYS), as written and resolved (as Storage
    reads a location): `source cur's location`, `source tags's lifecycle_path`."""
    for entry in (*config.sources, *config.inventory):
        for key in LOCAL_PATH_KEYS:
            value = getattr(entry, key, None)
            name = f"source {entry.name}'s {'location' if key == 'path' else key}"
            for place in (value,) if isinstance(value, str) else value if isinstance(value, tuple) else ():
                if isinstance(place, str) and not place.startswith("s3://"):
                    yield from ((place, name), (Path(place).expanduser().resolve(), name))


class Unpathed:
    """`text` with each of the server's folders said by its name (`places`: folder → name)."""

    def __init__(self, places: Iterable[tuple[Path | str, str]]):
        self.patterns = []
        kept = {(str(Path(folder)), name) for folder, name in places  # a relative one would match words
                if Path(folder).is_absolute() and Path(folder) != Path("/")}
        for folder, name in sorted(kept, key=lambda place: -len(place[0])):  # a folder inside another first
            # the folder as a sentence says it (`the lake at /srv/lake`, `the lake /srv/lake`), or a path in it;
            # not a longer name (`/srv/lake2`), a sentence's full stop after it being no part of it
            # (nor the end of another's, `s3://bucket/srv/lake`)
            said = rf"(?:\b{re.escape(name)}(?: at| folder)? )?(?<![\w.~-]){re.escape(folder)}(?:/|(?![\w-]|\.\w))"
            self.patterns.append((re.compile(said), name))

    @classmethod
    def of(cls, config: Config, lake_root: Path) -> Unpathed:
        """The config's lake (`lake_root`, resolved as the lake names itself, and as the config
        writes it) and its local report.out, as written and resolved."""
        out = default_out(config)
        reports = () if out.startswith("s3://") else (out, Path(out).resolve())
        return cls([(lake_root, LAKE), (config.lake, LAKE), *((folder, REPORTS) for folder in reports),
                    *source_places(config)])

    def __call__(self, text: str | None) -> str | None:
        if not text:
            return text
        for pattern, name in self.patterns:
            text = pattern.sub(lambda found: f"{name}'s " if found[0].endswith("/") else name, text)
        return text

    def throughout(self, data: object) -> object:
        """JSON data with every text in it said so (a small answer's: `notes` alone for one of rows)."""
        if isinstance(data, str):
            return self(data)
        if isinstance(data, dict):
            return {key: self.throughout(value) for key, value in data.items()}
        return [self.throughout(value) for value in data] if isinstance(data, list) else data

    def notes(self, body: dict) -> dict:
        """An answer's JSON with its `notes` said so."""
        return {**body, "notes": [self(note) for note in body["notes"]]} if body.get("notes") else body

    def refusal(self, status: int, exc: SpendlakeError, asked: str, *, where: str | None = None,
                hint: str | None = None, logged: bool = False) -> Response:
        """`exc` as the client asking `asked` is told it (`where` and `hint` in place of its own),
        said so; its whole text in the service's log (at INFO, unless `logged` already) when that
        named a folder."""
        told = [exc.message, where or exc.where, hint or exc.hint]
        said = [self(text) for text in told]
        if said != told and not logged:
            log.info("%s: %s", asked, exc)
        message, where, hint = said
        return error_response(status, message, where=where, hint=hint)
