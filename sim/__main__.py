"""``python -m sim``: list, run, sweep and tour scenarios, the built-in ones and a user's own (stable output).

    python -m sim list
    python -m sim run SCENARIO --seed N [--until DURATION] [--jsonl FILE] [--perfetto FILE] [--digest] [--check] [--plan JSON]
    python -m sim sweep SCENARIO --seeds 0:500 [--workers 2 | --dask ADDRESS] [--no-progress]

SCENARIO is a built-in name (``swarm``) or a user's scenario as ``MODULE:NAME``: a dotted module
(``myapp.sim_tests:billing``) or a file (``tests/sim_app.py:billing``), which is imported to register
it (``NAME``: the name given to ``@sim.scenario``, or the setup function's). The operator names the
module on the command line; nothing read from a trace or a network is ever imported.

A scenario that draws a fault plan (``swarm``) prints it as one line (``plan: crash(n1)@3.20 ...``); when
a seed fails, the output ends with the command that reproduces it, and ``--plan JSON`` replays an
exact plan (the JSON of ``sim.faults.FaultPlan.to_json``) on that seed instead of the one it draws.
``sweep`` runs the seeds on ``--workers`` local processes, or on a Dask cluster (``--dask
tcp://host:8786``: its workers must be able to import the scenario's module), with a progress bar on a
terminal (``--no-progress``: none).
    python -m sim tour --out DIR
    python -m sim mutants [--only NAMES] [--seeds 200] [--workers 1] [--budget S] [--list]   (sim/mutants.py)
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from datetime import timedelta

from . import scenarios

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(text: str) -> timedelta:
    """``90``, ``90s``, ``15m``, ``2h``, ``1d``, ``250ms`` -> timedelta (a bare number is seconds)."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 90s, 15m, 2h, 1d)")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["mutants"]:  # its own options: see sim/mutants.py
        from .mutants import main as mutants

        return mutants(args_in[1:])
    parser = argparse.ArgumentParser(prog="python -m sim", description="casty lab: the deterministic world")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="print the built-in scenarios, one per line")
    run = sub.add_parser("run", help="run one scenario")
    run.add_argument("name", metavar="SCENARIO", help="a built-in name, or MODULE:NAME (a dotted module or a .py file)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--until", type=parse_duration, default=None, help="how long to simulate (default: the scenario's)")
    run.add_argument("--jsonl", help="write the trace as JSON lines")
    run.add_argument("--perfetto", help="write the trace in the Chrome/Perfetto trace format")
    run.add_argument("--digest", action="store_true", help="print digest=<hex> as the last line")
    run.add_argument("--check", action="store_true", help="run the scenario's checks; exit 1 if one fails")
    run.add_argument("--plan", default=None, help="replay this fault plan (JSON, as a failing seed prints it) instead of the seed's own")
    sweep = sub.add_parser("sweep", help="run one scenario under many seeds with its checks, in parallel")
    sweep.add_argument("name", metavar="SCENARIO", help="a built-in name, or MODULE:NAME (a dotted module or a .py file)")
    sweep.add_argument("--seeds", default="0:100", help="start:stop (stop excluded), or one seed")
    sweep.add_argument("--workers", type=int, default=2, help="local worker processes (1: in this process)")
    sweep.add_argument("--dask", metavar="ADDRESS", default=None, help="run the seeds on this Dask scheduler (needs `distributed`)")
    sweep.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    tour = sub.add_parser("tour", help="run the tour scenarios and write their figures and a summary")
    tour.add_argument("--out", default="out/tour")
    tour.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    if args.command == "list":
        known = scenarios.registered()
        width = max(len(name) for name in known)
        for name, chosen in known.items():
            print(f"{name:<{width}}  {chosen.description}")
        return 0

    if args.command == "run":
        from .faults import FaultPlan
        from .sweep import load

        try:
            plan = FaultPlan.from_json(args.plan) if args.plan is not None else None
            chosen = load(args.name)  # a MODULE:NAME spec imports the operator's module
            result = scenarios.run(chosen.name, args.seed, until=args.until, check=args.check, plan=plan)
        except (KeyError, ValueError) as exc:
            print(exc.args[0], file=sys.stderr)
            return 2
        except ImportError as exc:
            print(f"cannot import the scenario's module: {exc}", file=sys.stderr)
            return 2
        spec = shlex.quote(args.name)
        trace = result.trace
        print(f"scenario={args.name} seed={args.seed} rows={len(trace)} simulated={result.world.now:g}s")
        drawn = result.world.results.get("plan")
        if isinstance(drawn, FaultPlan):
            print(f"plan: {drawn}")
        kinds: dict[str, int] = {}
        for row in trace:
            kinds[row.kind] = kinds.get(row.kind, 0) + 1
        for kind in sorted(kinds):
            print(f"  {kind:<24} {kinds[kind]}")
        if args.jsonl:
            trace.to_jsonl(args.jsonl)
            print(f"wrote {args.jsonl}")
        if args.perfetto:
            trace.to_perfetto(args.perfetto)
            print(f"wrote {args.perfetto} (open it in ui.perfetto.dev)")
        status = 0
        if args.check:
            if result.failures:
                for failure in result.failures:
                    print(f"CHECK FAILED {failure}", file=sys.stderr)
                print(f"reproduce: python -m sim run {spec} --seed {args.seed} --check", file=sys.stderr)
                if isinstance(drawn, FaultPlan) and "fault-plan" in result.scenario.tags:  # the others refuse --plan
                    print(f"replay:    python -m sim run {spec} --seed {args.seed} --check --plan {shlex.quote(drawn.to_json())}", file=sys.stderr)
                status = 1
            else:
                print(f"checks passed ({len(result.scenario.checks)})")
        if args.digest:
            print(f"digest={trace.digest()}")
        return status

    if args.command == "sweep":
        from .sweep import parse_seeds, reference, report, timed_sweep

        try:
            seeds = parse_seeds(args.seeds)
            ref = reference(args.name)
        except (KeyError, ValueError) as exc:
            print(exc.args[0], file=sys.stderr)
            return 2
        except ImportError as exc:
            print(f"cannot import the scenario's module: {exc}", file=sys.stderr)
            return 2
        if args.dask is None:
            results, elapsed = timed_sweep(ref, seeds, args.workers, progress=args.progress)
        else:
            import importlib

            try:
                client_type = importlib.import_module("distributed").Client  # optional (the test extra): untyped
            except ImportError:
                print("--dask needs the `distributed` package (pip install distributed)", file=sys.stderr)
                return 2
            with client_type(args.dask) as client:
                results, elapsed = timed_sweep(ref, seeds, executor=client, progress=args.progress)
        for line in report(str(ref), results, elapsed):
            print(line)
        return 0 if all(r.ok for r in results) else 1

    if args.command == "tour":
        # the tour draws, so it lives with the views (sim.viz.tour), above the world layer; the command line is the
        # one place that reaches up to it, late, so that importing sim never imports a view
        from sim.viz.tour import write_tour

        return write_tour(args.out, seed=args.seed)
    return 2


if __name__ == "__main__":
    sys.exit(main())
