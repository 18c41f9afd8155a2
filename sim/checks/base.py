"""What a check is: a function of a finished ``World`` that raises ``CheckFailed``; ``run_checks`` collects the failures."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..world import World

Check = Callable[["World"], None]


class CheckFailed(AssertionError):
    """A property of the run does not hold; the message says which and where."""

    def __init__(self, check: str, message: str) -> None:
        super().__init__(f"{check}: {message}")
        self.check = check
        self.detail = message


def run_checks(checks: Iterable[Check], world: World) -> list[CheckFailed]:
    failures = []
    for check in checks:
        try:
            check(world)
        except CheckFailed as failure:
            failures.append(failure)
        except AssertionError as failure:
            failures.append(CheckFailed(getattr(check, "__name__", "check"), str(failure)))
    return failures
