"""`spendlake estimate`: thin over service.planning.estimate and service.planning.plans."""

from __future__ import annotations

import click

from service.cli.output import default_format, emit, format_option
from service.cli.params import SingleValueCommand

FRACTION_HELP = "a fraction, a percentage or a range (0.35-0.45)"


@click.command("estimate", cls=SingleValueCommand)
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False),
              help="YAML plan whose keys are these flags' names with underscores; flags override it.")
@click.option("--params", help="Parameters, e.g. 7B or 70e9.")
@click.option("--tokens", help="Training tokens, e.g. 2T.")
@click.option("--gpu", help="GPU type: A100, H100, H100-PCIE, H200, B200, L40S, MI300X, or one from the config.")
@click.option("--gpus", type=int, help="Number of GPUs.")
@click.option("--mfu", help=f"Model FLOPs utilisation: {FRACTION_HELP}.")
@click.option("--price-per-gpu-hour", help="USD per GPU-hour (default: estimate.gpus.<GPU> in the config).")
@click.option("--debug-overhead", help=f"Extra compute for debugging: {FRACTION_HELP} (default 0).")
@click.option("--eval-overhead", help=f"Extra compute for evaluation: {FRACTION_HELP} (default 0).")
@click.option("--failure-overhead", help=f"Extra compute lost to failures and restarts: {FRACTION_HELP} (default 0).")
@click.option("--bytes-per-param", help="Checkpoint bytes per parameter incl. optimizer state (default 16).")
@click.option("--checkpoints-kept", type=int, help="Checkpoints kept at once (default 5).")
@click.option("--dataset-size", help="Dataset size, e.g. 8TB (default 0).")
@click.option("--dataset-versions", type=int, help="Dataset versions stored (default 1).")
@click.option("--logs-size", help="Logs and metrics kept, e.g. 50GB (default 0).")
@click.option("--retention-days", type=int, help="Days the storage is kept after the run (default 30).")
@click.option("--storage-price-per-gb-month", help="USD per GB-month (default: estimate.storage_price_per_gb_month).")
@click.option("--register", "register_name", help="Store the plan under this name (needs --project and --start).")
@click.option("--project", help="Project the registered plan belongs to.")
@click.option("--experiment", help="Experiment the registered plan belongs to (optional).")
@click.option("--run", help="Run the registered plan follows: its actual is that run's jobs' cost, whatever experiment "
                            "they carry (optional; needs attribution.clusters).")
@click.option("--start", help="Planned start of the run: a day, YYYY-MM-DD, from its midnight UTC.")
@format_option
@click.pass_obj
def estimate_command(obj, plan_file: str | None, register_name: str | None, project: str | None,
                     experiment: str | None, run: str | None, start: str | None, fmt: str | None, **values) -> None:
    """Price a pretraining run: 6·N·D FLOPs, GPU-hours, wall-clock, compute and storage cost."""
    from service.core.errors import UsageError
    from service.findings.plan_values import as_billed
    from service.planning.estimate import estimate, plan_inputs
    from service.planning.plans import plan_from_estimate, register_plan

    if register_name and not (project and start):
        raise UsageError("registering a plan needs --project and --start", where="--register")
    if not register_name and (project or experiment or run or start):
        raise UsageError("--project, --experiment, --run and --start only apply with --register NAME",
                         where="--register")
    if run and "run" not in obj.config.attribution.dimensions:  # a run's cost is told by job records
        raise UsageError("a plan on a run needs job records: the config has no `clusters:` under `attribution:`",
                         where="--run", hint="add them (README: Shared GPU clusters), or register the plan on its "
                         "project (and --experiment)")
    # pricing a run needs no lake: without a config the built-in GPU table prices it
    result = estimate(plan_inputs(values, plan_file), obj.config if register_name else obj.config_or_defaults())
    plan = None
    if register_name:
        plan, problems = as_billed(obj.lake, obj.config, plan_from_estimate(
            result, name=register_name, project=project, experiment=experiment, start=start, run=run))
        replaced = register_plan(obj.lake, plan)
        click.echo(f"{'replaced' if replaced else 'registered'} plan {plan.name} for project {plan.project}"
                   f"{'/' + plan.experiment if plan.experiment else ''}{', run ' + plan.run if plan.run else ''}: "
                   f"{plan.to_json()['start']} to "
                   f"{plan.to_json()['end']}", err=True)
        for problem in problems:
            click.echo(f"warning: plan {plan.name}: {problem}", err=True)
    columns = ["quantity", "low", "high"] if result.is_range else ["quantity", "value"]
    data = result.to_json() | ({"plan": plan.to_json()} if plan else {})
    title = f"{result.gpu.name} × {result.inputs.gpus}, MFU {result.inputs.mfu}, ${result.price_per_gpu_hour}/GPU-hour"
    rows = result.rows(display=(fmt or default_format()) == "table")
    emit(rows, columns, fmt, json_data=data, title=title, right=("low", "high", "value"), whole=("low", "high"))

