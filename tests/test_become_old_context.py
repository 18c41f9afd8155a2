"""After become, a write through the replaced run's context is refused as Fenced, whatever write it is (course 02's finding)."""

from __future__ import annotations

from dataclasses import dataclass

from casty import ActorSystem, Askable, Context, Fenced, actor

from conftest import LoopClock, run_virtual


@dataclass(frozen=True)
class Open(Askable[str]):
    who: str


@actor(initial=0)
async def shut(ctx: Context[int, Open]) -> None:
    """Becomes ``ajar`` (a str state), then writes through its own, replaced, context with ``update``."""
    async for msg in ctx.inbox:
        await ctx.become(ajar, msg.who)
        try:
            await ctx.state.update(lambda n: n + 1)
            msg.reply_to.tell("saved")
        except Fenced:
            msg.reply_to.tell("fenced")


@actor(initial="")
async def ajar(ctx: Context[str, Open]) -> None:
    async for msg in ctx.inbox:
        msg.reply_to.tell(f"ajar: {ctx.state.value}")


def test_update_through_a_context_replaced_by_become_is_fenced() -> None:
    """state.update from the context become replaced raises Fenced (as state.set does), and the old run still answers."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(shut, "door")
            assert await ref.ask(Open("ana")) == "fenced"
            assert await ref.ask(Open("bia")) == "ajar: ana"

    run_virtual(main)
