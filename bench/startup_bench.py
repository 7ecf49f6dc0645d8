"""A query command's whole process, this checkout against a baseline checkout: start-up
(imports, config, the lake's snapshot) and the query, alternating, median of `--repeat`.

    git -C /work/main worktree add --detach /tmp/base main
    nice -n 10 python bench/startup_bench.py --baseline /tmp/base --repeat 8 \\
        --config C -- attribute --since 7d --by project,experiment --format json

Each run is `python -m service --config C <command>` from the checkout's root (so that
checkout's code runs, with this interpreter), under `/usr/bin/time`: wall, CPU (user + sys,
DuckDB's threads included) and peak RSS. The two answers (stdout) must be identical.
`--no-bytecode` runs both without any .pyc (an empty PYTHONPYCACHEPREFIX and
PYTHONDONTWRITEBYTECODE=1: every module compiled at each start, as in an image installed with
`pip install --no-compile`). Prints a table and writes JSON to bench/out/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(checkout: Path, config: str, command: list[str], env: dict[str, str]) -> tuple[float, float, int, str]:
    """(wall s, CPU s, peak RSS MB, stdout) of one whole process."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as timing:
        done = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", timing.name, sys.executable, "-m",
                               "service", "--config", config, *command], cwd=checkout, env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{checkout}: exit {done.returncode}\n{done.stderr[-2000:]}")
        wall, user, system, rss_kb = timing.read().split()[-4:]
    return float(wall), float(user) + float(system), int(rss_kb) // 1024, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="another checkout's root (e.g. of main)")
    parser.add_argument("--config", required=True)
    parser.add_argument("--repeat", type=int, default=8)
    parser.add_argument("--no-bytecode", action="store_true", help="no .pyc anywhere: every module compiled")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the spendlake command after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    env = dict(os.environ)
    if args.no_bytecode:  # a prefix no .pyc was ever written to, and none written now
        env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(Path(tempfile.gettempdir()) / "startup-no-pyc"))
    checkouts = {"baseline": args.baseline.resolve(), "this": REPO}
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in checkouts}
    answers: dict[str, str] = {}
    for _ in range(args.repeat):  # alternating, so a change of the machine's load hits both alike
        for name, checkout in checkouts.items():
            wall, cpu, rss, answers[name] = run(checkout, args.config, command, env)
            runs[name].append((wall, cpu, rss))
    if answers["baseline"] != answers["this"]:
        sys.exit("the answers differ")
    result = {"when": datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"), "command": " ".join(sys.argv),
              "load_average": os.getloadavg()}
    for name, values in runs.items():
        walls, cpus, rsss = zip(*values)
        result[name] = {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus), "rss_mb": max(rsss),
                        "walls": walls, "cpus": cpus}
        print(f"{name:9s} median wall {statistics.median(walls):.2f} s, CPU {statistics.median(cpus):.2f} s, "
              f"peak RSS {max(rsss)} MB; CPU {', '.join(f'{c:.2f}' for c in cpus)}")
    print(f"this / baseline: CPU {result['this']['cpu_s'] / result['baseline']['cpu_s']:.2f}, "
          f"wall {result['this']['wall_s'] / result['baseline']['wall_s']:.2f}; answers identical; "
          f"load average {' '.join(f'{v:.1f}' for v in result['load_average'])}")
    out = REPO / "bench" / "out" / f"startup-{result['when']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
