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
  instead of a widget whose controls would move nothing without a kernel; any other saved widget
  with controls gets one line under it saying so (``note_dead_controls``).

The npm packages are fetched with ``npm pack`` into ``--npm`` on the first export (only the two
tarballs, no dependency tree); without npm the pages are still written, with a warning, and
every widget other than the explorer's then shows nothing. ``network_loads(page)`` lists what a
page would fetch from the network (scripts, stylesheets, fonts, frames, images, CSS imports,
addresses in inline scripts and widget modules the bundle lacks); a page with any is refused.
A notebook that fails is reported and the others are still exported (exit status 1).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import subprocess
import sys
import tarfile
from html.parser import HTMLParser
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
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

_REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)
_NOT_A_LOAD = re.compile(r"^\s*(?:data|blob|about|javascript|mailto):", re.IGNORECASE)
_CDN = re.compile(r"cdn\.jsdelivr\.net|unpkg\.com|cdnjs\.cloudflare\.com|cdn\.plot\.ly|code\.jquery\.com"
                  r"|fonts\.googleapis\.com|fonts\.gstatic\.com|polyfill\.io", re.IGNORECASE)
_NAMESPACE = re.compile(r"https?://www\.w3\.org/", re.IGNORECASE)  # XML namespaces and DTD names in scripts: names, never fetched
_CSS_URL = re.compile(r"""url\(\s*["']?([^"')\s]+)""", re.IGNORECASE)
_CSS_IMPORT = re.compile(r"""@import\s+["']([^"']+)["']""", re.IGNORECASE)
_JS_STRING = re.compile(r"""(["'`])((?:[a-z][a-z0-9+.-]*:)?//[^"'`\s]+)\1""", re.IGNORECASE)
# the attributes whose value the browser fetches (an <a href> is a link, not a load)
_LOADING = {
    "script": ("src",), "link": ("href", "imagesrcset"), "iframe": ("src",), "frame": ("src",), "img": ("src", "srcset"),
    "source": ("src", "srcset"), "video": ("src", "poster"), "audio": ("src",), "track": ("src",), "embed": ("src",),
    "object": ("data",), "input": ("src",), "image": ("href", "xlink:href"), "use": ("href", "xlink:href"),
    "feimage": ("href", "xlink:href"),
}
_JS_TYPES = ("", "text/javascript", "application/javascript", "module")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# what the widget manager's bundle defines itself; any other model or view module it fetches from a CDN (jsdelivr)
BUNDLED_WIDGET_MODULES = ("@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/output")


def _remote(value: str) -> bool:
    return bool(_REMOTE.match(value)) and not _NOT_A_LOAD.match(value)


def _css_loads(css: str) -> list[str]:
    return [u for u in _CSS_URL.findall(css) + _CSS_IMPORT.findall(css) if _remote(u)]


def _srcset(value: str) -> list[str]:
    return [part.strip().split()[0] for part in value.split(",") if part.strip()]


class _Scan(HTMLParser):
    """Collects what a page would fetch: see ``network_loads``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in: tuple[str, str] | None = None  # (tag, script type) while inside a <script> or <style>
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in _LOADING.get(tag, ()):
                urls = _srcset(value) if name.endswith("srcset") else [value]
                self.found += [f"<{tag} {name}> {u}" for u in urls if _remote(u)]
            elif name.startswith("data-") and _remote(value):
                self.found.append(f"<{tag} {name}> {value.strip()}")
            elif name == "style":
                self.found += [f"<{tag} style> {u}" for u in _css_loads(value)]
            elif name == "srcdoc":
                self.found += [f"<{tag} srcdoc> {u}" for u in network_loads(value)]
        if tag in ("script", "style"):
            kind = dict(attrs).get("type") or ""
            self._in, self._text = (tag, kind.strip().lower()), []

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._in is None or tag != self._in[0]:
            return
        (kind, script_type), text = self._in, "".join(self._text)
        self._in = None
        if kind == "style":
            self.found += [f"<style> {u}" for u in _css_loads(text)]
        elif script_type in _JS_TYPES:
            self.found += [f"<script> {m.group(2)}" for m in _JS_STRING.finditer(text) if not _NAMESPACE.match(m.group(2))]
        elif script_type == WIDGET_STATE:
            self.found += _widget_state_loads(text)


def _widget_state_loads(text: str) -> list[str]:
    """The widget modules the manager would fetch from its CDN, and what the HTML held in widget values loads."""
    try:
        state = json.loads(text).get("state", {})
    except (ValueError, AttributeError):
        return ["<script widget-state> unreadable JSON (the manager would fail on it)"]
    found: list[str] = []
    for model in state.values():
        values = model.get("state", {})
        for module, version in ((model.get("model_module"), model.get("model_module_version")),
                                (values.get("_view_module"), values.get("_view_module_version"))):
            if module is not None and module not in BUNDLED_WIDGET_MODULES:
                found.append(f"widget module {module}@{version} (not in the bundle: fetched from its CDN)")
        for name, value in values.items():
            if isinstance(value, str) and "<" in value:
                found += [f"widget {model.get('model_name')}.{name}: {u}" for u in network_loads(value)]
    return sorted(set(found))


def network_loads(page: str) -> list[str]:
    """What ``page`` would fetch from the network, each named by where it is; ``[]`` for a page that works offline.

    Looked at: every attribute the browser fetches (``<script src>``, ``<link href>``, ``<iframe src>``,
    ``<img src/srcset>``, media, ``<object data>``, SVG ``href``), ``data-*`` attributes holding an
    address (``data-main`` of require.js, lazy loaders), CSS ``url(...)`` and ``@import`` in ``<style>``
    and ``style=``, every address written as a string in an inline script (``require.config`` paths,
    a renderer's URL), the HTML inside ``srcdoc`` and inside widget values, widget modules the
    manager's bundle lacks (it fetches those from jsdelivr), and any known CDN's name anywhere.
    An address is remote when it has a scheme other than data/blob/about/javascript/mailto, or
    starts with ``//`` (protocol-relative); ``<a href>`` is a link, not a load, and is left alone.
    """
    scan = _Scan()
    scan.feed(page)
    scan.close()
    found = list(dict.fromkeys(scan.found))
    found += sorted({m.group(0).lower() for m in _CDN.finditer(page)})
    return found


def network_scripts(page: str) -> list[str]:
    """The older name of ``network_loads`` (kept for callers)."""
    return network_loads(page)


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


# widget models that only show something; any other model in a view (a slider, a dropdown, a button, Play) is a control
_DISPLAY_ONLY = {"HTMLModel", "HTMLMathModel", "LabelModel", "ImageModel", "OutputModel", "HBoxModel", "VBoxModel",
                 "BoxModel", "GridBoxModel", "LayoutModel"}


def controls_in(state: dict[str, Any], model_id: str) -> list[str]:
    """The model names of the controls in the view of ``model_id`` (its model and every child, through IPY_MODEL_ refs)."""
    found, seen, todo = [], set(), [model_id]
    while todo:
        key = todo.pop()
        model = state.get(key)
        if key in seen or model is None:
            continue
        seen.add(key)
        name = str(model.get("model_name", ""))
        if name not in _DISPLAY_ONLY and not name.endswith("StyleModel"):
            found.append(name)
        values = model.get("state", {})
        for value in values.get("children", []) if isinstance(values.get("children"), list) else []:
            if isinstance(value, str) and value.startswith("IPY_MODEL_"):
                todo.append(value[len("IPY_MODEL_"):])
    return sorted(set(found))


STATIC_NOTE = ('<p class="casty-static-note">Saved view: with no kernel behind this page these controls move nothing. '
               "Run the notebook to use them.</p>")


def note_dead_controls(nb: Any) -> int:
    """After each widget output holding controls, one more output saying they move nothing here; returns how many.

    A page without a kernel draws a slider where it was saved, and dragging it runs nothing; the line
    (an output of its own, so it takes a row of the output area like any other) keeps a reader from
    waiting for a chart to redraw.
    """
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    marked = 0
    for cell in nb.cells:
        if "outputs" not in cell:
            continue
        outputs = []
        for output in cell.outputs:
            outputs.append(output)
            view = output.get("data", {}).get(WIDGET_VIEW)
            if isinstance(view, dict) and controls_in(state, str(view.get("model_id", ""))):
                outputs.append(nbformat.v4.new_output("display_data", data={"text/html": STATIC_NOTE}))  # type: ignore[no-untyped-call]
                marked += 1
        cell.outputs = outputs
    return marked


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
    note_dead_controls(shown)
    body, _ = exporter.from_notebook_node(shown)
    return str(body)


def export(notebook: Path, out: Path, *, run: bool = True) -> Path:
    """Execute ``notebook`` (unless ``run`` is False) and write ``out/<stem>.html``; refuses a page that loads from the network."""
    nb = nbformat.read(notebook, as_version=4)  # type: ignore[no-untyped-call]
    if run:
        execute(nb, notebook.parent)
    page = render(nb)
    remote = network_loads(page)
    if remote:
        raise RuntimeError(f"{notebook.name}: the page would load from the network: {', '.join(remote[:5])}")
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{notebook.stem}.html"
    target.write_text(page, encoding="utf-8")
    return target


def drop_stale(out: Path, notebooks: list[Path]) -> list[Path]:
    """Delete the pages in ``out`` that belong to none of ``notebooks`` (a renamed or removed chapter); returns them."""
    stale = sorted(set(out.glob("*.html")) - {out / f"{n.stem}.html" for n in notebooks})
    for page in stale:
        page.unlink()
    return stale


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
    if not args.notebooks:  # a full export: the pages of notebooks that are gone (renamed) would linger
        for stale in drop_stale(args.out, notebooks):
            print(f"removed {stale} (no notebook {stale.stem}.ipynb)")
    failed: list[str] = []
    for notebook in notebooks:  # one broken notebook does not hide whether the others export
        try:
            target = export(notebook, args.out)
        except Exception as exc:  # a cell that raised (nbclient's CellExecutionError), or a page that would load from the network
            failed.append(notebook.name)
            last = _ANSI.sub("", str(exc)).strip().splitlines()[-1][:300]  # a traceback's last line, without its colours
            print(f"FAILED {notebook.name}: {type(exc).__name__}: {last}", file=sys.stderr)
            continue
        print(f"wrote {target}")
    if failed:
        print(f"{len(failed)} of {len(notebooks)} notebooks not exported: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
