"""Run bench/local.py under two interpreters and print the figures side by side.

One interpreter has the public casty release installed (the speed anchor), the other has ours. The two runs go one
after the other, never at the same time, so that they do not compete for the machine's two cores.

Usage::

    python bench/compare.py                      # /tmp/anchor/bin/python against .venv/bin/python
    python bench/compare.py --quick              # passes --quick to both runs
    python bench/compare.py --anchor PY --ours PY -- --reps 5   # anything after -- goes to both runs

The last column is ours/anchor: above 1.00 ours is faster, below it slower. Exits non-zero when either run fails or
lacks a figure.
"""

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCAL = REPO / "bench" / "local.py"
FIGURES = ("ask/s", "tell+update/s", "activations/s")
PARAMS = ("mode", "reps", "ask.n", "tell.n", "activation.n")


@dataclass(frozen=True)
class Run:
    """What one run of bench/local.py printed, by label."""

    name: str
    interpreter: str
    values: dict[str, str]

    def rate(self, figure: str) -> float:
        return float(self.values[figure])


def parse(output: str) -> dict[str, str]:
    """`label value` lines into a dict; the value is the rest of the line."""
    values: dict[str, str] = {}
    for text in output.splitlines():
        label, _, value = text.strip().partition(" ")
        if label:
            values[label] = value.strip()
    return values


def run(name: str, interpreter: str, extra: list[str]) -> Run:
    command = [interpreter, str(LOCAL), *extra]
    print(f"running {name}: {' '.join(command)}", file=sys.stderr, flush=True)
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout)
        sys.stderr.write(done.stderr)
        raise SystemExit(f"{name} run failed with exit code {done.returncode}")
    values = parse(done.stdout)
    missing = [figure for figure in FIGURES if figure not in values]
    if missing:
        sys.stderr.write(done.stdout)
        raise SystemExit(f"{name} run printed no {', '.join(missing)}")
    return Run(name, interpreter, values)


def report(anchor: Run, ours: Run) -> str:
    """Which runtime each side ran, the parameters, then one row per figure with the ratio ours/anchor."""
    lines = []
    for side in (anchor, ours):
        v = side.values
        lines.append(
            f"{side.name:<7} python {v.get('python', '?')}, casty {v.get('casty.version', '?')}"
            f" ({v.get('casty.dist', '?')}) from {v.get('casty.file', '?')}"
        )
    params = [f"{label} {anchor.values.get(label, '?')}" for label in PARAMS]
    lines.append("params  " + ", ".join(params))
    rows = [("figure", "anchor", "ours", "ours/anchor")]
    for figure in FIGURES:
        a, o = anchor.rate(figure), ours.rate(figure)
        rows.append((figure, f"{a:.0f}", f"{o:.0f}", f"{o / a:.2f}" if a > 0 else "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for label, a_text, o_text, ratio in rows:
        lines.append(f"{label:<{widths[0]}}  {a_text:>{widths[1]}}  {o_text:>{widths[2]}}  {ratio:>{widths[3]}}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare bench/local.py figures of two casty runtimes.")
    parser.add_argument("--anchor", default="/tmp/anchor/bin/python", help="interpreter with the public casty")
    parser.add_argument("--ours", default=str(REPO / ".venv" / "bin" / "python"), help="interpreter with ours")
    parser.add_argument("--quick", action="store_true", help="pass --quick to both runs")
    parser.add_argument("extra", nargs="*", help="after --: more arguments for bench/local.py")
    args = parser.parse_args(argv)
    extra = (["--quick"] if args.quick else []) + list(args.extra)

    anchor = run("anchor", args.anchor, extra)
    ours = run("ours", args.ours, extra)
    print(report(anchor, ours))
    differ = [label for label in PARAMS if anchor.values.get(label) != ours.values.get(label)]
    if differ:
        print(f"warning: the runs differ in {', '.join(differ)}; the figures are not comparable", file=sys.stderr)
    if anchor.values.get("python") != ours.values.get("python"):
        print("warning: the runs used different Python versions, which moves asyncio-bound figures by itself",
              file=sys.stderr)
    if anchor.values.get("casty.file") == ours.values.get("casty.file"):
        print("warning: both runs imported the same casty; this compares a runtime with itself", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
