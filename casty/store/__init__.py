"""Durable stores: the real adapters of the Store port."""

from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = ["MemoryStore", "SQLiteStore"]
