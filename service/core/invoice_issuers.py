"""Who invoices a line: the provider itself (one of its own companies), or a third party.

FOCUS reads an InvoiceIssuerName other than the ProviderName as a third party collecting the
payment (a marketplace's seller, a reseller), and wants such a line's BilledCost to be 0
(BilledCost-C-005-C: the third party's own invoice bills it). A bill's legal entity is often
one of the provider's own companies (`Amazon Web Services EMEA SARL` for `AWS`): that is no
third party (PROVIDER_ENTITIES, own_entity_sql).

A delivery holding lines a third party invoices that bill a cost anyway is kept as it is (the
bill says what was paid) and said once (third_party_billed, in the ingest's warnings): its
total counts them, so the user can check they are not billed again on the third party's invoice.
`spendlake export` writes such a line's InvoiceIssuerName as its ProviderName (the entity stays in
`x_InvoicingEntity`), so the dataset stays valid and every cost stays the lake's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from service.core.units import amounts_text

# Provider names and the first words of the companies that invoice for them.
PROVIDER_ENTITIES = {
    "aws": ("amazon", "aws"), "amazon web services": ("amazon", "aws"),
    "microsoft": ("microsoft",), "microsoft azure": ("microsoft",), "azure": ("microsoft",),
    "google cloud": ("google",), "google": ("google",), "gcp": ("google",),
    "oracle": ("oracle",), "oracle cloud infrastructure": ("oracle",), "oci": ("oracle",),
}


def own_entity_sql(issuer: str, provider: str) -> str:
    """SQL: the invoicing entity is one of the provider's own companies."""
    cases = []
    for name, words in PROVIDER_ENTITIES.items():
        starts = " OR ".join(f"lower({issuer}) LIKE '{word}%'" for word in words)
        cases.append(f"(lower({provider}) = '{name}' AND ({starts}))")
    return "(" + " OR ".join(cases) + ")"


def third_party_sql(issuer: str, provider: str) -> str:
    """SQL: a line's invoicing entity (`issuer`, '' as none) is a third party: not its provider
    (`provider`), nor one of the provider's own companies."""
    return (f"(nullif({issuer}, '') IS NOT NULL AND {issuer} IS DISTINCT FROM {provider} "
            f"AND NOT coalesce({own_entity_sql(issuer, provider)}, false))")


def third_party_billed(con: duckdb.DuckDBPyConnection, paths: Sequence[Path], where: str) -> str | None:
    """The warning for the staged partitions `paths` of one delivery (its files: `where`) whose
    lines a third party invoices bill a cost (BilledCost not 0), or None: their count, their
    BilledCost per currency and the issuers, the first three by cost."""
    if not paths:
        return None
    lines = (f"SELECT InvoiceIssuerName AS issuer, ProviderName AS provider, BillingCurrency AS currency, BilledCost "
             f"FROM read_parquet(?) WHERE coalesce(BilledCost, 0) <> 0 "
             f"AND {third_party_sql('InvoiceIssuerName', 'ProviderName')}")
    found = con.execute(f"SELECT issuer, provider, currency, count(*), sum(BilledCost) FROM ({lines}) GROUP BY ALL "
                        "ORDER BY abs(sum(BilledCost)) DESC, issuer, provider, currency",
                        [[str(path) for path in paths]]).fetchall()
    if not found:
        return None
    count = sum(row[3] for row in found)
    totals: dict[str | None, object] = {}
    for _, _, currency, _, billed in found:
        totals[currency] = totals.get(currency, 0) + billed
    named = list(dict.fromkeys(f"{issuer!r} for {provider!r}" for issuer, provider, *_ in found))
    issuers = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
    return (f"{where}: {count:,} line(s) invoiced by a company other than their provider ({issuers}) bill "
            f"{amounts_text(totals.items())} (BilledCost), where FOCUS bills 0 on a charge a third party collects "
            "(a marketplace's seller, a reseller: its own invoice bills it); they are kept and counted in the bill's "
            "total: check they are not billed again on the third party's invoice (`spendlake export` writes their "
            "InvoiceIssuerName as the provider, the company in x_InvoicingEntity)")
