"""What a running `spendlake serve` reads: the sources of the config it runs, which are no longer
its file's once that file is edited and not reloaded (SIGHUP). The service records them as it
takes the lake's service lock, beside its holder (`_state/serving.json`); `status` and `forget`
read them while that holder still holds the lock, so a source the service still serves is not
called an orphan to forget, nor forgotten under it (its scrapes and API would then read nothing
of it, and /readyz say it not ready, until the next ingest read it again).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.core.errors import LakeBusyError, NotWritableError, SpendlakeError
from service.core.locks import holder

if TYPE_CHECKING:
    from service.core.config import Config
    from service.core.lake import Lake

log = logging.getLogger(__name__)
STATE = "serving"  # _state/serving.json


@dataclass(frozen=True)
class Serving:
    holder: str  # "4242 on host-1 #3f9a0c1d2e4b", as the service lock names it
    config: str
    sources: frozenset[str]

    @property
    def pid(self) -> str:
        return self.holder.split(" ", 1)[0]


@contextmanager
def serving(lake: Lake, config: Config) -> Iterator[None]:
    """Hold the lake's service lock, the config's sources recorded as the ones it serves; a record
    the disk has no room for is said, and the service runs on (status and forget then tell nothing).
    The record goes as the lock is let go: a reload's service in this process has the same holder
    (SIGHUP), and a record it could not write left its predecessor's sources read as its own."""
    with lake.lock("service"):
        names = sorted({source.name for source in (*config.sources, *config.inventory)})
        try:
            lake.write_state(STATE, {"holder": holder(), "config": str(lake.config_file or ""), "sources": names})
        except (OSError, SpendlakeError) as exc:
            log.warning("could not record the sources this service serves in %s: %s", lake.state_file(STATE), exc)
        try:
            yield
        finally:
            try:
                lake.state_file(STATE).unlink(missing_ok=True)
            except OSError as exc:  # read as this process's while it holds the lock: a successor's write replaces it
                log.warning("could not remove the record of the sources this service served, %s: %s",
                            lake.state_file(STATE), exc)


@contextmanager
def serving_or_reading(lake: Lake, config: Config) -> Iterator[NotWritableError | None]:
    """`serving`, yielding None; or, on a lake this process may not write (a lake a batch job writes,
    mounted read-only for the service; its permissions another user's), no lock and no record,
    yielding why: the service then answers reads only (service/serve/reads_only.py). Such services
    write nothing, so two of them read one lake side by side, as any readers do, beside its writer."""
    refused = None
    with ExitStack() as stack:
        try:
            stack.enter_context(serving(lake, config))
        except NotWritableError as exc:
            refused = exc
        yield refused


def served_now(lake: Lake) -> Serving | None:
    """The running service's record, while the service that wrote it holds the lock; else None."""
    now = lake.lock_holder("service")
    if not now:
        return None
    try:
        record = lake.read_state(STATE)
    except (OSError, SpendlakeError):  # unreadable: as if unrecorded
        return None
    if record.get("holder") != now:  # a service that died before it wrote its own: the last one's
        return None
    return Serving(now, record.get("config") or "", frozenset(record.get("sources") or ()))


def refuse_served(lake: Lake, source: str) -> None:
    """A LakeBusyError (exit 3) when the running service still serves `source`."""
    served = served_now(lake)
    if served is None or source not in served.sources:
        return
    raise LakeBusyError(f"spendlake serve (pid {served.holder}) still serves {source}: the config it runs "
                        f"({served.config or 'its config'}, as read when it started or last reloaded) declares it",
                        where="SOURCE", hint=f"reload the service (`kill -HUP {served.pid}`) once its config no longer "
                        f"declares {source}, then `spendlake forget {source}`")


def served_note(lake: Lake) -> dict[str, str]:
    """The sources the running service still serves → the words status says of each."""
    served = served_now(lake)
    if served is None:
        return {}
    return {source: f"spendlake serve (pid {served.holder}) still serves it from the config it runs: reload it "
                    f"(`kill -HUP {served.pid}`) once its config no longer declares {source}, then "
                    f"`spendlake forget {source}` removes it" for source in served.sources}
