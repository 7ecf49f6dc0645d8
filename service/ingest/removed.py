"""A period read again only because files of its last delivery are gone from the location (a
lifecycle rule expiring older files, a partial sync, an `rm`), none added or changed: its bill
shrinks with them, and no cloud delivered anything. The ingest line says so (the files gone, the
rows and sums from and to); a final (invoiced) period keeps its committed delivery and fails
instead, until the files are back or `spendlake ingest --accept-removed` accepts the smaller bill.
A period none of whose files is left is not read at all (service.ingest.periods): it keeps what
the lake holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from connectors.base import Delivery
from service.core.errors import DataError
from service.core.files import files_named
from service.core.ledger import LedgerEntry, totals_text

ACCEPT_HINT = ("restore the files to the location, or run `spendlake ingest --accept-removed` to accept the "
               "smaller bill")


def gone_from(entries: Sequence[LedgerEntry], group: Sequence[Delivery], known: Mapping[str, dict],
              listed: set[str], joined: Callable[[Sequence[Delivery], None], Delivery]) -> dict[str, list[str]]:
    """Per period of `entries` (the ledger's, of the periods `group` delivers), the files of its
    committed delivery gone from the location, where the rest of that delivery is `group` as it was:
    the id it was committed under is `joined`'s of the group's files and the gone ones' fingerprints
    as last surveyed (`known`). A period with a file added or changed besides is not in it."""
    found: dict[str, list[str]] = {}
    for entry in entries:
        gone = sorted(uri for uri in entry.files if uri not in listed)
        if not gone:
            continue
        by_uri = {record["uri"]: fingerprint for fingerprint, record in known.items()}  # rare: built when a file is gone
        if any(uri not in by_uri for uri in gone):
            continue
        was = [*group, *(Delivery(by_uri[uri], None, (uri,)) for uri in gone)]
        if joined(was, None).delivery_id == entry.delivery_id:
            found[entry.billing_period] = gone
    return found


def kept_final(gone: Mapping[str, list[str]], entries: Sequence[LedgerEntry]) -> DataError | None:
    """The error failing a delivery that would shrink a final period only by its files gone."""
    entry = next((e for e in entries if e.final and e.billing_period in gone), None)
    if entry is None:
        return None
    files = gone[entry.billing_period]
    return DataError(f"{len(files)} file(s) of the period's final (invoiced) delivery are gone from the location "
                     f"and none was added or changed: read again, its {entry.rows} rows {totals_text(entry.totals)} "
                     "would lose theirs; the lake keeps that delivery", where=files_named(files, ""), hint=ACCEPT_HINT)


def shrinks(gone: Mapping[str, list[str]], entries: Sequence[LedgerEntry],
            replaces: Mapping[str, LedgerEntry]) -> list[str]:
    """The warnings of the committed `entries` read again only because files of theirs are gone."""
    return [f"{entry.source} {entry.billing_period}: {len(gone[entry.billing_period])} file(s) of its last delivery "
            f"are gone from the location ({files_named(gone[entry.billing_period], '')}), none added or changed: "
            f"the period shrinks from {old.rows} rows {totals_text(old.totals)} to {entry.rows} rows "
            f"{totals_text(entry.totals)}"
            for entry in entries if entry.billing_period in gone and (old := replaces.get(entry.billing_period))]
