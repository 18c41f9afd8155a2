"""The public names: ``casty.__all__`` and ``sim.__all__`` pinned, each resolving, each from a module documented for it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import casty
import sim

ROOT = Path(__file__).resolve().parent.parent

CASTY_ALL = [
    "NOBODY",
    "ActorFailed",
    "ActorSystem",
    "ActorType",
    "Askable",
    "Backoff",
    "CastyError",
    "Clock",
    "Cluster",
    "ClusterClient",
    "ConfigurationError",
    "Context",
    "DropLate",
    "Fenced",
    "FireAll",
    "FixedDelay",
    "Inbox",
    "InvalidCatchUp",
    "InvalidCronExpression",
    "InvalidIdentity",
    "MailboxFull",
    "ManualClock",
    "MemoryStore",
    "MessageTooLarge",
    "NotStarted",
    "Occurrence",
    "Observer",
    "Placement",
    "ReentrancyError",
    "Ref",
    "Refused",
    "RemoteError",
    "SQLiteStore",
    "Schedule",
    "ScheduleReferenceInUse",
    "ScheduleReferenceNotFound",
    "ScheduleReferenceRequired",
    "ScheduleStateError",
    "SchedulerNotStarted",
    "SchemaError",
    "Skip",
    "State",
    "Store",
    "SystemClock",
    "Transport",
    "Unavailable",
    "UnknownActor",
    "actor",
]

SIM_ALL = ["World", "FaultPlan", "FaultMix", "Trace", "CheckFailed", "scenario", "sweep", "checks", "faults", "scenarios"]

PUBLIC_MODULES = (
    "casty.errors",
    "casty.observer",
    "casty.ports",
    "casty.clock",
    "casty.store",
    "casty.cluster.config",
    "casty.cluster.client",
)
"""The public modules ``casty/__init__.py``'s docstring lists; a re-export may also come from the private ``casty._core``."""


def _sources(path: Path, package: str) -> dict[str, str]:
    """Each name ``path`` imports (``from M import name``), mapped to the absolute module ``M``."""
    sources: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = f"{base}.{node.module}" if node.level and node.module else (node.module or base)
            for alias in node.names:
                sources[alias.asname or alias.name] = module
    return sources


def test_casty_all_is_pinned() -> None:
    """casty.__all__ is exactly the pinned list (a name added or dropped is a decision, made here too)."""
    assert casty.__all__ == CASTY_ALL


def test_every_casty_name_resolves_and_star_import_gives_exactly_all() -> None:
    """Every name in casty.__all__ is an attribute of casty, none twice, and `from casty import *` binds exactly those."""
    assert len(set(casty.__all__)) == len(casty.__all__)
    assert [name for name in casty.__all__ if not hasattr(casty, name)] == []
    namespace: dict[str, object] = {}
    exec("from casty import *", namespace)
    assert sorted(name for name in namespace if name != "__builtins__") == sorted(CASTY_ALL)


def test_cluster_and_its_client_are_exported_as_the_cluster_layer_defines_them() -> None:
    """casty.Cluster and casty.ClusterClient are the classes of casty.cluster.config and casty.cluster.client."""
    from casty.cluster.client import ClusterClient
    from casty.cluster.config import Cluster

    assert (casty.Cluster, casty.ClusterClient) == (Cluster, ClusterClient)


def test_every_casty_name_comes_from_a_documented_module() -> None:
    """Each re-export is imported from a public module of the docstring's list or from the private casty._core, nothing else."""
    sources = _sources(ROOT / "casty" / "__init__.py", "casty")
    undocumented = {
        name: sources.get(name)
        for name in CASTY_ALL
        if not (sources.get(name) in PUBLIC_MODULES or str(sources.get(name)).startswith("casty._core."))
    }
    assert undocumented == {}
    homes = {name: getattr(getattr(casty, name), "__module__", None) for name in CASTY_ALL}
    foreign = {
        name: home
        for name, home in homes.items()
        if isinstance(home, str) and home.startswith(("casty.protocol", "casty.cluster"))
        and home not in PUBLIC_MODULES
    }
    assert foreign == {}  # nothing public is defined in the protocol cores or the node's drivers


def test_the_docstring_names_the_public_private_and_internal_modules() -> None:
    """casty's docstring lists every public module, calls casty._core private and casty.protocol internal."""
    doc = casty.__doc__ or ""
    assert [module for module in PUBLIC_MODULES if f"``{module}``" not in doc] == []
    assert "* private: ``casty._core``" in doc
    assert "* internal: ``casty.protocol``" in doc
    core_doc = (sys.modules["casty._core"].__doc__ or "").split("\n\n")[1]
    assert core_doc.startswith("Private: what a user may import is re-exported from ``casty``")


def test_no_private_or_internal_module_is_reached_through_a_public_name() -> None:
    """casty has no attribute naming a module of casty._core or casty.protocol in its __all__ (they stay unadvertised)."""
    assert [name for name in CASTY_ALL if type(getattr(casty, name)).__name__ == "module"] == []
    assert all(not name.startswith("_") for name in CASTY_ALL)


def test_sim_all_is_pinned_and_every_name_resolves() -> None:
    """sim.__all__ is exactly the pinned list, and every name is an attribute of sim."""
    assert sim.__all__ == SIM_ALL
    assert [name for name in sim.__all__ if not hasattr(sim, name)] == []


@pytest.mark.parametrize("first", ["casty.cluster.config", "casty.cluster.runtime", "casty.cluster.client", "casty._core.system"])
def test_importing_a_module_first_in_a_fresh_interpreter_makes_no_cycle(first: str) -> None:
    """A fresh interpreter importing a cluster or runtime module first (casty/__init__ imports the cluster) gets casty whole."""
    code = f"import {first}, casty; print(casty.Cluster.__name__, casty.ActorSystem.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "Cluster ActorSystem", "")


def _casty_classes() -> list[type]:
    """Every class defined in a module of casty (each module imported; none runs a node on import)."""
    import importlib
    import inspect
    import pkgutil

    found: list[type] = []
    for info in pkgutil.walk_packages(casty.__path__, "casty."):
        if info.name == "casty.__main__":
            continue
        module = importlib.import_module(info.name)
        found += [obj for _, obj in inspect.getmembers(module, inspect.isclass) if obj.__module__ == info.name]
    return found


def test_each_public_error_name_is_one_class_defined_in_casty_errors() -> None:
    """No casty module defines a class named like an error of casty.errors (one RemoteError, one Fenced, one Refused)."""
    import casty.errors

    names = {name for name, obj in vars(casty.errors).items() if isinstance(obj, type) and issubclass(obj, BaseException)}
    twins = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in _casty_classes() if cls.__name__ in names and cls.__module__ != "casty.errors")
    assert twins == []
    from casty.cluster.client import RemoteError

    assert RemoteError is casty.RemoteError  # the client raises the one class, as the runtime does
