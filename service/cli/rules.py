"""`spendlake rules …` and `spendlake findings …`: thin commands over service.findings."""

from __future__ import annotations

import sys

import click

from service.core.registry import RULE_CATEGORIES
from service.cli.output import default_format, emit, format_option
from service.cli.params import SingleValueGroup
from service.core.output import one_line
from service.core.units import money_text

# A terminal table per category, each with its own money column: a month of waste and a
# one-off overrun are different money and are never in one column.
CATEGORY_TABLES = {
    "waste": ("monthly_waste_usd", "waste: spend that buys nothing (monthly_waste_usd: USD a month while it goes on, "
                                   "or a finished cost once: `per`)"),
    "overspend": ("impact_usd", "overspend: spend above a budget or what was expected (impact_usd)"),
    "ownership": ("impact_usd", "ownership: spend nobody owns (impact_usd: in the window)"),
}
TABLE_COLUMNS = ["id", "rule", "severity", "team", "project"]


def emit_findings(findings, fmt: str | None, *, title: str = "findings") -> None:
    """JSON and CSV: one list with `category`, `impact_usd` and `monthly_waste_usd` (waste
    only); a table: one per category, in the store's order."""
    from rules.base import waste_per
    from service.findings.store import LIST_COLUMNS, finding_rows

    rows = finding_rows(findings)
    if (fmt or default_format()) != "table":
        emit(rows, LIST_COLUMNS, fmt, json_data=rows)
        return
    if not rows:
        click.echo(f"{title}: none")
    per = {f.id: waste_per(f) for f in findings if f.category == "waste"}  # a failed attempt's cost is no month's
    for category in RULE_CATEGORIES:
        money, about = CATEGORY_TABLES[category]
        shown = [{**r, money: money_text(r[money]), "per": per.get(r["id"])}  # 12,345.67
                 for r in rows if r["category"] == category]
        if shown:
            # the summary (wrapped) says what the finding is: a narrow terminal leaves out the
            # resource id, status, project and severity before it, and it before the team and rule
            columns = [*TABLE_COLUMNS, money, *(["per"] if category == "waste" else []), "summary",
                       "resource_id", "status"]
            emit(shown, columns, "table", title=f"{title} — {about}", right=(money,),
                 whole=(money, "per"), wrap=("summary",),  # a finished cost without its `once` reads as a month's waste
                 late=("rule", "team", "summary"))


@click.group("rules", cls=SingleValueGroup)
def rules_group() -> None:
    """List and run the rules (waste, overspend, ownership)."""


@rules_group.command("list")
@format_option
@click.pass_obj
def rules_list(obj, fmt: str | None) -> None:
    """Every rule with whether it is enabled and its first docstring line."""
    from service.findings.run import rules_for

    rows = [{"rule": r.name, "category": r.category, "enabled": r.config.enabled,
             "about": (r.__doc__ or sys.modules[type(r).__module__].__doc__ or "").strip().splitlines()[0]}
            for r in rules_for(obj.config)]
    emit(rows, ["rule", "category", "enabled", "about"], fmt, title="spendlake rules", wrap=("about",))


@rules_group.command("run")
@click.option("--rule", "only", multiple=True, help="Only this rule (repeatable).")
@click.option("--since", default="7d", show_default=True, help="Window the rules look back over (7d, 24h, a date).")
@click.option("--dry-run", is_flag=True, help="Evaluate and print; store nothing.")
@click.option("--fail-on", type=click.Choice(["warning", "critical"]), default=None,
              help="Exit 1 when an open finding at or above this severity exists.")
@format_option
@click.pass_obj
def rules_run(obj, only: tuple[str, ...], since: str, dry_run: bool, fail_on: str | None, fmt: str | None) -> None:
    """Run the rules over the lake and store their findings (exit 3 if a rule failed)."""
    from service.findings.run import fails, run_rules

    report = run_rules(obj.config, only=only, since=since, dry_run=dry_run)
    result = report.result
    for outcome in result.outcomes:
        line = f"{outcome.rule}: {outcome.status}"
        line += f", {outcome.findings} finding(s)" if outcome.status == "ok" else ""
        line += f" — {outcome.message}" if outcome.message else ""
        click.echo(line, err=True)
    emit_findings(result.seen, fmt, title="findings" + (" (dry run, not stored)" if dry_run else ""))
    if result.errors:
        sys.exit(3)
    if fails(result.seen, fail_on):
        sys.exit(1)


@click.group("findings", cls=SingleValueGroup, invoke_without_command=True)
@click.option("--rule", default=None, help="Only this rule's findings.")
@click.option("--team", default=None, help="Only this team's findings.")
@click.option("--status", type=click.Choice(["open", "acknowledged", "resolved", "all"]), default="open",
              show_default=True)
@click.option("--category", type=click.Choice(RULE_CATEGORIES), default=None,
              help="Only waste, overspend or ownership findings.")
@format_option
@click.pass_context
def findings_group(ctx: click.Context, rule: str | None, team: str | None, status: str, category: str | None,
                   fmt: str | None) -> None:
    """List stored findings by category (waste, overspend, ownership), largest first;
    `findings ack ID` acknowledges one."""
    if ctx.invoked_subcommand is not None:
        return
    from service.core.folding import folded
    from service.core.suggest import suggestion
    from service.findings.run import check_rule_names
    from service.findings.store import known_values, load_findings

    if rule:
        check_rule_names([rule])
    found = load_findings(ctx.obj.lake, rule=rule, team=team, status=None if status == "all" else status,
                          category=category)
    teams = known_values(ctx.obj.lake, "team") if team and not found else []
    if team and not found and folded(team) not in {folded(t) for t in teams}:
        click.echo(f"warning: --team {team} matches no finding; {suggestion(team, teams, 'teams')}", err=True)
    emit_findings(found, fmt)


@findings_group.command("ack")
@click.argument("finding_id", metavar="ID")
@click.option("--reason", required=True, help="Why (e.g. planned, expected, bug, or a sentence).")
@click.pass_obj
def findings_ack(obj, finding_id: str, reason: str) -> None:
    """Acknowledge a finding: it stays listed as acknowledged instead of open."""
    from service.findings.store import acknowledge

    finding = acknowledge(obj.lake, finding_id, reason)
    # a resource id is an S3 key or a log group's name: anyone's text
    click.echo(one_line(f"acknowledged {finding.id} ({finding.rule}, {finding.resource_id}): {finding.ack_reason}"))
