"""The loop's exception handling: asyncio's handler protocol, recording every error context in ``loop.errors``.

A mixin of ``VirtualLoop`` (no slots of its own: it reads the loop's ``_exception_handler``, ``errors``,
``name`` and ``_env``), apart from ``sim.loop`` because it runs only when a callback failed. It logs on the
logger ``sim.loop``, as before the split.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("sim.loop")


class ExceptionHandling:
    """get/set_exception_handler, default_exception_handler, call_exception_handler (a mixin of VirtualLoop)."""

    __slots__ = ()

    # ---------------------------------------------------------------- errors

    def get_exception_handler(self) -> Any:
        return self._exception_handler

    def set_exception_handler(self, handler: Any) -> None:
        if handler is not None and not callable(handler):
            raise TypeError(f"A callable object or None is expected, got {handler!r}")
        self._exception_handler = handler

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        """Record the context in ``errors`` and log it (on logger ``sim.loop``)."""
        self.errors.append(dict(context))
        message = context.get("message") or "Unhandled exception in event loop"
        exception = context.get("exception")
        details = []
        for key in sorted(context):
            if key in ("message", "exception"):
                continue
            try:
                details.append(f"{key}: {context[key]!r}")
            except Exception:  # a broken __repr__ must not hide the error
                details.append(f"{key}: <unprintable {type(context[key]).__name__}>")
        text = f"[{self.name} t={self._env._now}ns] {message}"
        if details:
            text += "\n" + "\n".join(details)
        exc_info = (type(exception), exception, exception.__traceback__) if isinstance(exception, BaseException) else None
        logger.error(text, exc_info=exc_info)

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        handler = self._exception_handler
        if handler is None:
            try:
                self.default_exception_handler(context)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException:
                logger.error("Exception in default exception handler", exc_info=True)
            return
        try:
            handler(self, context)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            try:
                self.default_exception_handler(
                    {"message": "Unhandled error in exception handler", "exception": exc, "context": context}
                )
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException:
                logger.error("Exception in default exception handler while handling an error in a custom one", exc_info=True)
