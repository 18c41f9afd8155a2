"""Export the notebooks to HTML pages that render with no network (``make html``).

    python notebooks/tools/export_html.py [--out out/html] [--npm out/npm] [NOTEBOOK ...]

Each notebook (default: every ``notebooks/*.ipynb``) is executed headless, its widget state kept,
and written as ``OUT/<name>.html`` with the ``offline`` template beside this script. What makes a
page work offline:

* every script a page loads is a relative path under ``OUT/static/``: ``require.js`` (the npm
  package ``requirejs``) and the widget manager's ``embed-amd.js`` (the npm package
  ``@jupyter-widgets/html-manager``, which renders saved widget state without a kernel), and so
  are the icon fonts its CSS loads (its dist folder's Font Awesome files, found through the
  template's require.js paths);
  MathJax and Mermaid, which the stock template loads from a CDN, are left out;
* an output that carries a static fallback (``sim.viz.explorer``: its metadata says
  ``casty.static_fallback``) shows that fallback, pre-rendered frames as images inside the page,
  instead of a widget whose controls would move nothing without a kernel.

The npm packages are fetched with ``npm pack`` into ``--npm`` on the first export (only the two
tarballs, no dependency tree); without npm the pages are still written, with a warning, and
every widget other than the explorer's then shows nothing. ``network_scripts(page)`` lists what a
page would fetch from the network; the export refuses to finish with any.
"""

from __future__ import annotations

import argparse
import copy
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TEMPLATES = HERE / "templates"
REQUIRE_JS = "static/require.js"
WIDGET_RENDERER = "static/html-manager/embed-amd.js"
PACKAGES = {"requirejs": "requirejs@^2.3", "html-manager": "@jupyter-widgets/html-manager@^1.0"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

_SCRIPT_SRC = re.compile(r"""<script\b[^>]*\bsrc\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_CDN = re.compile(r"cdn\.jsdelivr\.net|unpkg\.com|cdnjs\.cloudflare\.com|cdn\.plot\.ly|code\.jquery\.com", re.IGNORECASE)
_REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)


def network_scripts(page: str) -> list[str]:
    """What ``page`` would load from the network: remote ``<script src>`` values and any CDN address in it."""
    found = [src for src in _SCRIPT_SRC.findall(page) if _REMOTE.match(src)]
    found += sorted({m.group(0) for m in _CDN.finditer(page)})
    return found


def prefer_static(nb: Any) -> int:
    """Drop the widget view of outputs that carry a static fallback, so the page shows the fallback; returns how many."""
    changed = 0
    for cell in nb.cells:
        for output in cell.get("outputs", ()):
            meta = output.get("metadata", {}).get("casty", {})
            fallback = meta.get("static_fallback") if isinstance(meta, dict) else None
            data = output.get("data", {})
            if fallback and fallback in data and WIDGET_VIEW in data:
                del data[WIDGET_VIEW]
                changed += 1
    return changed


def fetch_assets(npm_dir: Path) -> Path | None:
    """The unpacked npm packages under ``npm_dir`` (fetched with ``npm pack`` when missing); None without npm."""
    wanted = {name: npm_dir / name / "package" for name in PACKAGES}
    if all(path.is_dir() for path in wanted.values()):
        return npm_dir
    npm = shutil.which("npm")
    if npm is None:
        return None
    npm_dir.mkdir(parents=True, exist_ok=True)
    for name, spec in PACKAGES.items():
        if wanted[name].is_dir():
            continue
        packed = subprocess.run([npm, "pack", "--silent", spec], cwd=npm_dir, check=True, capture_output=True, text=True)
        tarball = npm_dir / packed.stdout.strip().splitlines()[-1]
        target = npm_dir / name
        target.mkdir(exist_ok=True)
        with tarfile.open(tarball) as archive:
            archive.extractall(target, filter="data")
    return npm_dir


_BUNDLE_ASSET = re.compile(r"""\.p\s*\+\s*["']([\w.-]+\.(?:woff2?|ttf|eot|svg))["']""")


def bundle_assets(bundle: str) -> list[str]:
    """The files the widget bundle's CSS loads beside itself (webpack ``public path + name``: the icon fonts)."""
    return sorted(set(_BUNDLE_ASSET.findall(bundle)))


def install_assets(npm_dir: Path, out: Path) -> None:
    """Copy require.js and the widget manager's dist folder beside the pages; refuse if a font the bundle loads is missing.

    The fonts (Font Awesome, the icons of Play and of every button) are in the dist folder under
    hashed names; the page's require.js paths (the offline template) make the bundle look for them
    there. A missing one would not fail any page: its icons would just draw as empty boxes.
    """
    static = out / "static"
    static.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(npm_dir / "requirejs" / "package" / "require.js", out / REQUIRE_JS)
    target = out / "static" / "html-manager"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(npm_dir / "html-manager" / "package" / "dist", target,
                    ignore=shutil.ignore_patterns("*.map", "embed.js", "*.LICENSE.txt"))
    bundle = (out / WIDGET_RENDERER).read_text(encoding="utf-8")
    missing = [name for name in bundle_assets(bundle) if not (target / name).is_file()]
    if missing:
        raise RuntimeError(f"the widget bundle loads files that are not beside it in {target}: {', '.join(missing)}")


def execute(nb: Any, cwd: Path, timeout: int = 600) -> Any:
    """Run every cell headless in a fresh kernel, widget state kept (it is what the page renders)."""
    from nbclient import NotebookClient

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}},
                            store_widget_state=True)
    client.execute()
    return nb


def render(nb: Any) -> str:
    """The page of an executed notebook, with the offline template and local script paths."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="offline", extra_template_basedirs=[str(TEMPLATES)])  # type: ignore[no-untyped-call]
    exporter.require_js_url = REQUIRE_JS
    exporter.widget_renderer_url = WIDGET_RENDERER
    shown = copy.deepcopy(nb)
    prefer_static(shown)
    body, _ = exporter.from_notebook_node(shown)
    return str(body)


def export(notebook: Path, out: Path, *, run: bool = True) -> Path:
    """Execute ``notebook`` (unless ``run`` is False) and write ``out/<stem>.html``; refuses a page that loads from the network."""
    nb = nbformat.read(notebook, as_version=4)  # type: ignore[no-untyped-call]
    if run:
        execute(nb, notebook.parent)
    page = render(nb)
    remote = network_scripts(page)
    if remote:
        raise RuntimeError(f"{notebook.name}: the page would load from the network: {', '.join(remote[:5])}")
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{notebook.stem}.html"
    target.write_text(page, encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "html")
    parser.add_argument("--npm", type=Path, default=ROOT / "out" / "npm", help="where the npm packages are (fetched if missing)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    if not notebooks:
        print("no notebooks to export", file=sys.stderr)
        return 2
    assets = fetch_assets(args.npm)
    if assets is None:
        print("warning: npm not found: the pages are written without the widget manager (the explorer's frames still show)",
              file=sys.stderr)
    else:
        install_assets(assets, args.out)
    for notebook in notebooks:
        target = export(notebook, args.out)
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
