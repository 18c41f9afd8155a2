"""An activation's persisted schedules (``ctx.schedule``): adding, cancelling, arming, firing, recovering.

A schedule is data in the key's ``@schedules`` page (see ``casty._core.schedules``, where the
catch-up rule lives as a pure function); this part of ``Activation`` arms the timers that page
implies, against the wall clock, and writes the next due after each firing. ``ScheduleWork``
is a mixin (no state of its own: the activation's slots hold it), as ``MailboxWork`` is: a
firing delivers into the mailbox and writes a page in the same callback, with no object between.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .. import observer as ev
from ..errors import MailboxFull, SchemaError
from ..errors import InvalidCatchUp
from .catchup import CatchUp, Skip, checked, decide, encode
from .mailbox import MailboxWork
from .occurrence import ScheduledEnvelope
from .schedules import LAST_US, ArmedSchedule, Schedule, catch_up, checked_due, decode_schedules, encode_armed, to_micros
from .state import SCHEDULES_PAGE

if TYPE_CHECKING:
    from .actor import ActorType
    from .context import Context
    from .pages import PageWriter

__all__ = ["ScheduleWork", "NO_SCHEDULES"]

NO_SCHEDULES: Mapping[str, ArmedSchedule] = MappingProxyType({})
"""The schedules of a key that never had one: shared and read-only (see ``_writable_schedules``)."""

_SCHEDULES_PAGES = (SCHEDULES_PAGE,)


def checked_policy(name: str, policy: object) -> CatchUp:
    """``policy`` if it is a catch-up policy value, else InvalidCatchUp naming the schedule and what was given."""
    return checked(f"schedule {name!r}", "catch_up", policy)


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


class ScheduleWork(MailboxWork):
    """The schedules part of ``Activation``."""

    if not TYPE_CHECKING:  # no state of its own, no __dict__ (mypy would read slots () as "assigns nothing")
        __slots__ = ()

    behavior: ActorType[Any, Any]
    pages: dict[str, bytes] | None
    _pages: PageWriter

    if TYPE_CHECKING:  # Activation's own
        def check_lease(self, lease: int | None, operation: str) -> None: ...

    async def add_schedule(
        self, lease: int, ctx: Context[Any, Any], name: str, delay: timedelta, interval: timedelta | None, message: Any,
        catch_up: CatchUp,
    ) -> Schedule[Any]:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a schedule name must be a non-empty string, got {name!r}")
        policy = checked_policy(name, catch_up)
        if not name.isascii() and not _utf8(name):  # before anything is armed: the @schedules page could not hold it
            raise SchemaError(f"a schedule name must be valid unicode (it is stored as UTF-8), got {name!r}")
        delay_us = to_micros(delay, "delay")
        if delay_us < 0:
            raise ValueError(f"schedule {name!r}: delay must not be negative, got {delay}")
        every_us: int | None = None
        if interval is not None:
            every_us = to_micros(interval, "interval")
            if every_us <= 0:
                raise ValueError(f"schedule {name!r}: interval must be positive, got {interval}")
        schema = self.behavior.schema
        schema.check(message)
        data = self.system.codec.encode_message(message, schema)
        self.check_lease(lease, "schedule")
        now = self.system.clock.now_us()
        due_us = checked_due(f"schedule {name!r}", "delay", delay, now + delay_us)  # before anything changes
        if every_us is not None:
            checked_due(f"schedule {name!r}", "interval", interval, due_us + every_us)
        old = self._schedules.get(name)
        if old is not None:
            self._remove_schedule(old, "replaced")
        armed = ArmedSchedule(name, message, data, due_us, every_us, policy, encode(policy))
        self._writable_schedules()[name] = armed
        self._arm(armed, now)
        if self._idle_handle is not None:
            self.system.timers.cancel(self._idle_handle)
            self._idle_handle = None
        await self._pages.commit(lease, {SCHEDULES_PAGE: self._schedules_page()}, "schedule")
        return Schedule(self, lease, armed)

    async def cancel_schedule(self, lease: int, armed: ArmedSchedule) -> None:
        self.check_lease(lease, "schedule.cancel")
        if self._schedules.get(armed.name) is not armed:
            return
        self._remove_schedule(armed, "cancelled")
        await self._pages.commit(lease, {SCHEDULES_PAGE: self._schedules_page()}, "schedule.cancel")

    def schedule_handles(self, ctx: Context[Any, Any]) -> Mapping[str, Schedule[Any]]:
        return {name: Schedule(self, ctx._lease, armed) for name, armed in self._schedules.items()}

    def _writable_schedules(self) -> dict[str, ArmedSchedule]:
        """The key's schedules, to change: made on first use, as most keys never have one (until then
        ``_schedules`` is a shared, read-only empty mapping)."""
        schedules = self._schedules
        if not isinstance(schedules, dict):
            schedules = self._schedules = {}
        return schedules

    def _schedules_page(self) -> bytes | None:
        schedules = self._schedules
        return encode_armed(schedules.values()) if schedules else None

    def _remove_schedule(self, armed: ArmedSchedule, reason: str) -> None:
        armed.live = False
        if armed.timer is not None:
            self.system.timers.cancel(armed.timer)
            armed.timer = None
        del self._writable_schedules()[armed.name]
        self.system.emit(ev.ScheduleCancelled, self.type.name, self.key, armed.name, reason)

    def _end_out_of_range(self, armed: ArmedSchedule, due: int, now: int) -> None:
        """An interval whose next due would pass year 9999, where no datetime can say when: this firing was its last."""
        self.system.emit(ev.ScheduleFired, self.type.name, self.key, armed.name, due, now, None)
        self._remove_schedule(armed, "out-of-range")
        self._pages.commit_soon({SCHEDULES_PAGE: self._schedules_page()}, "schedule.fire")

    def _arm(self, armed: ArmedSchedule, now_us: int, *, announce: bool = True) -> None:
        """Set the timer of a schedule; ``announce`` it unless a ``ScheduleFired`` already said where it goes next."""
        wait_us = armed.due_us - now_us
        delay = wait_us / 1_000_000 if wait_us > 0 else 0.0
        armed.timer = self.system.timers.arm_wall_method(self._loop.time() + delay, armed.due_us, ScheduleWork._fire, self, armed)
        if announce:
            self.system.emit(ev.ScheduleArmed, self.type.name, self.key, armed.name, armed.due_us, armed.every_us)

    def _arm_recovered_schedules(self) -> None:
        """Install the timers of the ``@schedules`` page; a time that passed while inactive fires once, now."""
        assert self.pages is not None
        page = self.pages.get(SCHEDULES_PAGE)
        if page is None:
            return
        codec = self.system.codec
        now = self.system.clock.now_us()
        overdue: list[ArmedSchedule] = []
        for entry in decode_schedules(page):
            problem = entry.problem()
            if problem is not None:
                self.system.emit(ev.MessageDropped, self.type.name, self.key, entry.name, f"unusable schedule: {problem}")
                continue
            try:
                message = codec.decode_message(entry.message, self.behavior.schema)
            except SchemaError as exc:
                self.system.emit(ev.MessageDropped, self.type.name, self.key, entry.name, f"undecodable schedule: {exc}")
                continue
            try:
                policy = entry.policy()
            except InvalidCatchUp as exc:  # a page from a newer node: refused loudly, never read as Skip
                self.system.emit(ev.MessageDropped, self.type.name, self.key, entry.name, f"unusable schedule: {exc}")
                continue
            armed = ArmedSchedule(entry.name, message, entry.message, entry.due_us, entry.every_us, policy, entry.catch_up)
            self._writable_schedules()[entry.name] = armed
            if entry.due_us <= now:
                overdue.append(armed)
            else:
                self._arm(armed, now)
        for armed in overdue:
            self._fire(armed)

    def _fire(self, armed: ArmedSchedule) -> None:
        """A schedule timer went off: tell the occurrence(s) its catch-up policy delivers, then write the next due.

        ``Skip`` (the default) tells one message and resumes on the grid after now, as the
        seeds say; the other policies go through ``catchup.decide``: ``FireAll`` tells each
        delivered due in order (a ``ScheduleFired`` each), ``DropLate`` may tell nothing (a
        ``ScheduleDropped`` instead), ``FixedDelay`` leaves the grid. ``ScheduleCaughtUp``
        follows whenever occurrences were skipped and something was told."""
        armed.timer = None
        if not armed.live or self.closed:
            return
        system = self.system
        now = system.clock.now_us()
        if now < armed.due_us:
            # the wall clock is behind the loop's (stepped back, or drift): wait more, for the same due
            self._arm(armed, now, announce=False)
            return
        due = armed.due_us
        if type(armed.policy) is not Skip:
            if self._fire_under_policy(armed, due, now):
                self._write_fired_page()
            return
        # Skip, the default: the seeds' rule, one delivery (catchup.decide's Skip, inline: the hot path)
        envelope = ScheduledEnvelope(armed.message, armed.name, due, now)
        try:
            self.deliver(envelope)
        except MailboxFull as exc:
            self._emit_dropped(envelope, str(exc))
        loop_now = self._last_activity = self._loop.time()
        every = armed.every_us
        if every is None:
            system.emit(ev.ScheduleFired, self.type.name, self.key, armed.name, due, now, None)
            self._remove_schedule(armed, "done")
        else:
            next_us, skipped = catch_up(due, every, now)  # the first grid time after now: no burst
            envelope.skipped = skipped  # before the body can read it: this callback runs to its end first
            if next_us > LAST_US:
                self._end_out_of_range(armed, due, now)
                return
            armed.due_us = next_us
            observer = system.observer
            if observer is not None:
                observer(ev.ScheduleFired(self.type.name, self.key, armed.name, due, now, next_us))
                if skipped:
                    observer(ev.ScheduleCaughtUp(self.type.name, self.key, armed.name, due, now, next_us, skipped))
            # _arm(announce=False), inline, with the loop time just read
            armed.timer = system.timers.arm_wall_method(loop_now + (next_us - now) / 1_000_000, next_us, ScheduleWork._fire, self, armed)
        pages = self._pages
        if not pages.confirm_later:  # commit_soon, without its call (the lease: checked above, closed)
            pages.write_page_now(None, SCHEDULES_PAGE, _SCHEDULES_PAGES, self._schedules_page(), "schedule.fire")
        else:
            pages.commit_soon({SCHEDULES_PAGE: self._schedules_page()}, "schedule.fire")

    def _write_fired_page(self) -> None:
        """The page write that follows a firing (``_fire``'s last lines, for the policy path)."""
        pages = self._pages
        if not pages.confirm_later:
            pages.write_page_now(None, SCHEDULES_PAGE, _SCHEDULES_PAGES, self._schedules_page(), "schedule.fire")
        else:
            pages.commit_soon({SCHEDULES_PAGE: self._schedules_page()}, "schedule.fire")

    def _fire_under_policy(self, armed: ArmedSchedule, due: int, now: int) -> bool:
        """``_fire`` for a policy other than Skip, through ``catchup.decide``; False when nothing is left to write."""
        system = self.system
        every = armed.every_us
        decision = decide(armed.policy, due, every, now)
        dues, next_us, skipped = decision.dues(), decision.next_us, decision.skipped
        for occurrence_us in dues:
            envelope = ScheduledEnvelope(armed.message, armed.name, occurrence_us, now)
            envelope.skipped = skipped
            try:
                self.deliver(envelope)
            except MailboxFull as exc:
                self._emit_dropped(envelope, str(exc))
        loop_now = self._last_activity = self._loop.time()
        if next_us is None:
            if dues:
                system.emit(ev.ScheduleFired, self.type.name, self.key, armed.name, due, now, None)
            else:
                system.emit(ev.ScheduleDropped, self.type.name, self.key, armed.name, decision.first_us, now, None, skipped)
            self._remove_schedule(armed, "done")
            return True
        if next_us > LAST_US:
            self._end_out_of_range(armed, dues[-1] if dues else due, now)
            return False
        armed.due_us = next_us
        observer = system.observer
        if observer is not None:
            if not dues:
                observer(ev.ScheduleDropped(self.type.name, self.key, armed.name, decision.first_us, now, next_us, skipped))
            for occurrence_us in dues:
                observer(ev.ScheduleFired(self.type.name, self.key, armed.name, occurrence_us, now, next_us))
            if skipped and dues:
                observer(ev.ScheduleCaughtUp(self.type.name, self.key, armed.name, dues[0], now, next_us, skipped))
        armed.timer = system.timers.arm_wall_method(loop_now + (next_us - now) / 1_000_000, next_us, ScheduleWork._fire, self, armed)
        return True
