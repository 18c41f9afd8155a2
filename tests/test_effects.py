"""The effects ledger: ``ctx.effect`` in both worlds, and the checks that count effects per key.

The daily report of the schedules seed is the example: saving the day before building
omits a day when the node crashes mid-build (``at_least_once`` fails, ``at_most_once``
holds); building first repeats it (the other way round). Both broken on purpose by the
crash, so each check is seen failing on the bug it guards.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Generator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import simpy

from casty import ActorFailed, ActorSystem, Askable, Context, SchemaError, actor
from casty._core.effects import MAX_DEPTH, plain_details
from casty.observer import Effect
from sim.checks import CheckFailed, at_least_once, at_most_once, effects, exactly_once
from sim.effects import matches
from sim.trace import Trace
from sim.world import World
from tests.conftest import LoopClock, Recorder, run_virtual
from tests.effects_app import REPORT_BUILD_SECONDS, Arm, Pay, date_of, payer, report_build_first, report_save_first

DAY_S = 86_400.0


def _pay(world: World, node: str, *orders: str) -> None:
    async def client(system: ActorSystem) -> None:
        for order in orders:
            await system.ref(payer, "acme").ask(Pay(order, 500))

    world.spawn(node, client)


# ================================================================ the call and its row ======


def test_an_effect_becomes_a_trace_row_with_its_actor_key_node_and_plain_details() -> None:
    """`ctx.effect("charge:o1", amount=500, currency="EUR")` in a World is one `effect` row with exactly those fields."""
    world = World(0)
    world.add_node("n1")
    _pay(world, "n1", "o1")
    world.run(until=1)
    world.close()
    (row,) = world.trace.of("effect")
    assert (row.node, dict(row.fields)) == (
        "n1",
        {"actor": "tests.effects_app:payer", "key": "acme", "effect": "charge:o1", "node": "n1", "details": {"amount": 500, "currency": "EUR"}},
    )


def test_checks_read_a_trace_loaded_back_from_jsonl_the_same(tmp_path: Path) -> None:
    """The effect rows survive a JSONL round trip: the same groups, and the same failure message, from the file."""
    world = World(0)
    world.add_node("n1")
    _pay(world, "n1", "o1", "o1", "o2")
    world.run(until=1)
    world.close()
    world.trace.to_jsonl(tmp_path / "t.jsonl")
    loaded = Trace.from_jsonl(tmp_path / "t.jsonl")
    assert {k: len(v) for k, v in effects(loaded, "charge").items()} == {"charge:o1": 2, "charge:o2": 1}
    assert [dict(r.fields) for r in effects(loaded)["charge:o2"]] == [dict(r.fields) for r in effects(world)["charge:o2"]]
    messages = []
    for source in (world, loaded):
        with pytest.raises(CheckFailed) as caught:
            exactly_once(source, "charge")
        messages.append(str(caught.value))
    assert messages == ["exactly_once: charge:o1 happened 2 times (want exactly 1): n1 at 0.0002 s by payer[acme], n1 at 0.0002 s by payer[acme]"] * 2


@pytest.mark.parametrize(
    ("details", "error"),
    [
        ({"amount": math.nan}, "effect 'charge:o1': details.amount is nan; JSON has no NaN or infinity"),
        ({"amount": math.inf}, "effect 'charge:o1': details.amount is inf; JSON has no NaN or infinity"),
        ({"tags": {1}}, "effect 'charge:o1': details.tags is a set ({1}), not a plain JSON value (None, bool, int, finite float, str, list, or dict with str keys)"),
        ({"meta": {"lines": [1, b"x"]}}, "effect 'charge:o1': details.meta.lines[1] is a bytes (b'x'), not a plain JSON value (None, bool, int, finite float, str, list, or dict with str keys)"),
        ({"meta": {"a b": {2: 0}}}, "effect 'charge:o1': details.meta['a b'] has the key 2 (int); JSON keys are str"),
        ({"note": "\ud800"}, "effect 'charge:o1': details.note is not valid unicode (surrogates not allowed): '\\ud800'"),
        ({"at": timedelta(seconds=1)}, "effect 'charge:o1': details.at is a timedelta (datetime.timedelta(seconds=1)), not a plain JSON value (None, bool, int, finite float, str, list, or dict with str keys)"),
    ],
)
def test_details_that_are_not_plain_json_are_refused_naming_the_field(details: dict[str, Any], error: str) -> None:
    """NaN, infinity, sets, bytes, non-str keys, lone surrogates, timedeltas: SchemaError naming the field's path."""
    with pytest.raises(SchemaError) as caught:
        plain_details("charge:o1", details)
    assert str(caught.value) == error


def test_details_nested_past_the_limit_and_self_containing_lists_are_refused() -> None:
    """A list 32 levels deep is refused (naming the path's depth), and so is a list that contains itself (no recursion error)."""
    deep: Any = 0
    for _ in range(MAX_DEPTH):
        deep = [deep]
    with pytest.raises(SchemaError) as caught:
        plain_details("e", {"v": deep})
    assert str(caught.value) == f"effect 'e': details.v{'[0]' * (MAX_DEPTH - 1)} nests deeper than 32 levels"
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(SchemaError, match="nests deeper than 32 levels"):
        plain_details("e", {"v": loop})
    assert plain_details("e", {"v": deep[0], "t": (1, (2.5, None)), "ok": True}) == {"v": deep[0], "t": [1, [2.5, None]], "ok": True}



@dataclass(frozen=True)
class Try(Askable[str]):
    """Call ``ctx.effect`` with the arguments of ``CALLS[case]``; the reply says what happened."""

    case: int


CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    (("",), {}),
    ((5,), {}),
    (("charge:o1",), {"amount": math.nan}),
    (("charge:o1",), {"key": "k", "amount": 1}),  # `key` is positional-only: a detail may be called key
]


@actor(initial=0)
async def careless(ctx: Context[int, Try]) -> None:
    """Records the effect it is told to, and answers with the error it got (the body keeps serving)."""
    async for msg in ctx.inbox:
        args, details = CALLS[msg.case]
        try:
            ctx.effect(*args, **details)
        except (SchemaError, ValueError) as exc:
            msg.reply_to.tell(f"{type(exc).__name__}: {exc}")
        else:
            msg.reply_to.tell("recorded")


def test_a_bad_call_raises_in_the_body_records_nothing_and_the_key_keeps_serving(recorder: Recorder) -> None:
    """An empty key is a ValueError, a non-str key and NaN a SchemaError, nothing recorded for them; then a good call records."""

    async def main(clock: LoopClock) -> list[str]:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(careless, "c")
            return [await ref.ask(Try(case)) for case in range(len(CALLS))]

    assert run_virtual(main) == [
        "ValueError: an effect key must not be empty: it is the effect's identity (e.g. 'charge:order-17')",
        "SchemaError: an effect key must be a str, got int 5",
        "SchemaError: effect 'charge:o1': details.amount is nan; JSON has no NaN or infinity",
        "recorded",
    ]
    assert recorder.of(Effect) == [Effect(careless.name, "c", "charge:o1", "local", {"key": "k", "amount": 1})]


def test_a_real_system_whose_observer_is_off_logs_each_effect_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """With the default observer (off below DEBUG), an effect is still one INFO record on the `casty` logger."""

    async def main(clock: LoopClock) -> str:
        async with ActorSystem(node="n7", clock=clock) as system:
            return await system.ref(payer, "acme").ask(Pay("o9", 250))

    with caplog.at_level(logging.INFO, logger="casty"):
        assert run_virtual(main) == "charge:o9"
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("casty", "INFO", "effect charge:o9 by tests.effects_app:payer/acme on n7 {'amount': 250, 'currency': 'EUR'}")
    ]


def test_a_node_process_prints_each_effect_as_a_json_fact_and_its_trace_file_is_checked_like_a_simulated_run(tmp_path: Path) -> None:
    """`python -m casty node --module tests.effects_app --trace F`: each charge is an `effect` fact; at_most_once on F names the repeat."""
    import asyncio
    import json
    import subprocess
    import sys

    from tests.nodes import ROOT, child_env, free_ports, reap, run, spawn, until

    trace_file = tmp_path / "node.jsonl"

    async def ask(node: str, order: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "casty", "ask", "--seeds", node, "--type", "tests.effects_app:payer", "--key", "acme",
            "--message", json.dumps(["Pay", {"order": order, "amount": 700}]),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=child_env(),
        )
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        return str(json.loads(out)["value"])

    async def body() -> str:
        (port,) = free_ports(1)
        node = await spawn(port, [], "--heartbeat", "0.2", "--module", "tests.effects_app", "--trace", str(trace_file))
        try:
            await until(lambda: node.fact("ready") is not None, "ready", [node], 8.0)
            assert [await ask(node.name, "o3"), await ask(node.name, "o3")] == ["charge:o3", "charge:o3"]
            await until(lambda: len(node.of("effect")) == 2, "two effect facts", [node], 5.0)
            assert node.of("effect")[0] == {
                "event": "effect", "actor": "tests.effects_app:payer", "key": "acme", "effect": "charge:o3", "node": node.name,
                "details": {"amount": 700, "currency": "EUR"}, "by": node.name,
            }
        finally:
            await reap([node])
        return node.name

    name = run(body, 20.0)
    real = Trace.from_jsonl(trace_file)
    at_least_once(real, "charge:o3")
    with pytest.raises(CheckFailed) as caught:
        at_most_once(real, "charge")
    message = str(caught.value)
    assert message.startswith(f"at_most_once: charge:o3 happened 2 times (want at most 1): {name} at ")
    assert message.count(f"{name} at ") == 2 and message.endswith(" s by payer[acme]")


# ================================================================ what the checks count ======


def test_a_pattern_selects_the_key_and_the_keys_that_continue_it_after_a_separator() -> None:
    """`charge` selects charge, charge:o1, charge/o1, charge.o1, charge-o1; not charger or charge2; `*` selects all."""
    keys = ["charge", "charge:o1", "charge/o1", "charge.o1", "charge-o1", "charger", "charge2", "refund:o1"]
    assert [k for k in keys if matches(k, "charge")] == ["charge", "charge:o1", "charge/o1", "charge.o1", "charge-o1"]
    assert [k for k in keys if matches(k, "charge:o1")] == ["charge:o1"]
    assert [k for k in keys if matches(k, "*")] == keys


def test_each_check_on_a_run_with_a_repeat_and_an_omission() -> None:
    """o1 charged twice, o2 once, o3 never: each check passes or fails exactly as its rule says, naming key, count, node and time."""
    world = World(0)
    world.add_node("n1")
    world.add_node("n2")
    _pay(world, "n1", "o1", "o2")
    world.process(_later(world, 1.0, lambda: _pay(world, "n2", "o1")))
    world.run(until=2)
    world.close()
    orders = ["charge:o1", "charge:o2", "charge:o3"]
    at_most_once(world, "charge:o2")
    at_least_once(world, "charge", expected=orders[:2])
    exactly_once(world, "charge:o2")
    failures = []
    for check, kwargs in [(exactly_once, {}), (exactly_once, {"expected": orders}), (at_most_once, {}), (at_least_once, {"expected": orders})]:
        with pytest.raises(CheckFailed) as caught:
            check(world, "charge", **kwargs)
        failures.append(str(caught.value))
    twice = "charge:o1 happened 2 times ({}): n1 at 0.0002 s by payer[acme], n2 at 1 s by payer[acme]"
    assert failures == [
        "exactly_once: " + twice.format("want exactly 1"),
        "exactly_once: " + twice.format("want exactly 1") + "; charge:o3 happened 0 times (want exactly 1)",
        "at_most_once: " + twice.format("want at most 1"),
        "at_least_once: charge:o3 happened 0 times (want at least 1)",
    ]


def test_no_matching_effect_fails_exactly_and_at_least_once_and_passes_at_most_once() -> None:
    """A run with no charge at all: exactly_once and at_least_once fail ("0 times"), at_most_once holds."""
    world = World(0)
    world.add_node("n1")
    world.run(until=1)
    world.close()
    at_most_once(world, "charge")
    for check in (exactly_once, at_least_once):
        with pytest.raises(CheckFailed) as caught:
            check(world, "charge")
        assert str(caught.value) == f"{check.__name__}: no effect matching 'charge' happened (0 times)"


def test_a_trace_that_does_not_keep_effect_rows_and_bad_arguments_are_refused() -> None:
    """keep= without `effect` is a ValueError (counting nothing would pass); so are an empty pattern and an expected key it does not select."""
    world = World(0, keep=lambda kind: kind.startswith("activation."))
    world.add_node("n1")
    _pay(world, "n1", "o1", "o1")
    world.run(until=1)
    world.close()
    assert world.trace.counts["effect"] == 2
    with pytest.raises(ValueError, match="does not keep effect rows"):
        at_most_once(world, "charge")
    with pytest.raises(ValueError, match="an effect pattern is a non-empty str"):
        exactly_once(Trace(), "")
    with pytest.raises(ValueError, match="exactly_once: expected key 'refund:o1' is not selected by the pattern 'charge'"):
        exactly_once(Trace(), "charge", expected=["refund:o1"])


def _later(world: World, seconds: float, action: Any) -> Generator[simpy.Event, Any, None]:
    yield world.timeout(seconds)
    action()


# ================================================================ the seed's daily report ======


CRASH_DAY = 2  # the third midnight: the report of 2026-01-03


@functools.cache
def _daily_report(seed: int = 0) -> World:
    """The seed's example: two nodes, one key each (save-first, build-first), a crash of each at the third midnight.

    Five simulated days take seconds: the finished world is shared by the tests that read it (none changes it).
    """
    world = World(seed)
    world.add_node("save", store="sqlite")
    world.add_node("build", store="sqlite")

    async def arm(system: ActorSystem, actor_type: Any, key: str) -> None:
        await system.ref(actor_type, key).ask(Arm())

    world.spawn("save", arm, report_save_first, "save-first")
    world.spawn("build", arm, report_build_first, "build-first")
    midnight = DAY_S * (1 + CRASH_DAY)  # the run starts at 2026-01-01 00:00 UTC

    def faults(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(midnight + 10)  # save-first saved the day; its 30 s build is under way
        world.crash("save")
        yield world.timeout(REPORT_BUILD_SECONDS - 10 + 0.0001)  # build-first's report is built, its save not on disk yet
        world.crash("build")
        yield world.timeout(600)
        world.restart("save")
        world.restart("build")

    world.process(faults(world))
    world.run(until=timedelta(days=5, hours=1))
    world.close()
    return world


DAYS = [date_of(20_454 + i) for i in range(5)]  # 2026-01-01 is day 20454 since the epoch


def test_the_daily_report_save_first_omits_the_crashed_day_and_never_repeats_one() -> None:
    """Saving before building: at_most_once holds; at_least_once over the five days fails naming 2026-01-03, 0 times."""
    world = _daily_report()
    assert DAYS == ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05"]
    assert list(effects(world, "report:save-first")) == [f"report:save-first:{d}" for d in DAYS if d != "2026-01-03"]
    at_most_once(world, "report:save-first")
    with pytest.raises(CheckFailed) as caught:
        at_least_once(world, "report:save-first", expected=[f"report:save-first:{d}" for d in DAYS])
    assert str(caught.value) == "at_least_once: report:save-first:2026-01-03 happened 0 times (want at least 1)"


def test_the_daily_report_build_first_repeats_the_crashed_day_and_never_omits_one() -> None:
    """Building before saving: at_least_once holds; at_most_once fails naming 2026-01-03 twice, both builds' node and time."""
    world = _daily_report()
    at_least_once(world, "report:build-first", expected=[f"report:build-first:{d}" for d in DAYS])
    with pytest.raises(CheckFailed) as caught:
        at_most_once(world, "report:build-first")
    first = DAY_S * (1 + CRASH_DAY) + REPORT_BUILD_SECONDS  # built at the crash's midnight, then the node crashed
    again = first + DAY_S  # built again at the next midnight: the checkpoint still said 2026-01-02
    assert str(caught.value) == (
        f"at_most_once: report:build-first:2026-01-03 happened 2 times (want at most 1): "
        f"build at {first:g} s by report_build_first[build-first], build at {again:g} s by report_build_first[build-first]"
    )


def test_exactly_once_over_every_report_names_both_checkpoint_orders_failures() -> None:
    """exactly_once(world, "report", expected=all ten) fails with the omission and the repeat, in the order expected lists them."""
    world = _daily_report()
    with pytest.raises(CheckFailed) as caught:
        exactly_once(world, "report", expected=[f"report:{key}:{d}" for key in ("save-first", "build-first") for d in DAYS])
    assert str(caught.value).startswith(
        "exactly_once: report:save-first:2026-01-03 happened 0 times (want exactly 1); "
        "report:build-first:2026-01-03 happened 2 times (want exactly 1): build at 259230 s"
    )


pytest_plugins = ["pytester"]

_FAILING_CHECK = """
from sim.checks import at_most_once
from sim.trace import Trace

def test_a():
    trace = Trace()
    for _ in range(2):
        trace.add(0, "n1", None, "effect", {"actor": "m:a", "key": "k", "effect": "email:ann", "details": {}})
    at_most_once(trace, "email")
"""


def test_a_failing_check_shows_the_users_line_not_the_checks_insides(pytester: pytest.Pytester) -> None:
    """A failed effect check's pytest traceback ends at the test's call, with the message; no frame of sim/effects.py is shown."""
    pytester.makepyfile(test_check=_FAILING_CHECK)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert ">       at_most_once(trace, \"email\")" in out
    assert "E       sim.checks.CheckFailed: at_most_once: email:ann happened 2 times (want at most 1)" in out
    assert "sim/effects.py" not in out and "def _count" not in out
