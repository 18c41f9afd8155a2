"""The offline HTML export (notebooks/tools/export_html.py): no script from the network, the explorer's frames in the page."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import struct
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat as _nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
nbformat: Any = _nbformat  # untyped: seen as Any


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("export_html", ROOT / "notebooks" / "tools" / "export_html.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["export_html"] = module
    spec.loader.exec_module(module)
    return module


export_html = _tool()


def test_network_loads_flags_remote_sources_and_cdns() -> None:
    """A remote or protocol-relative script src and any CDN address are reported; a relative src is not."""
    page = (
        '<script src="static/require.js"></script>'
        '<script src="https://example.org/a.js"></script>'
        "<script src='//unpkg.com/b.js'></script>"
        "<script>var u = 'https://cdn.jsdelivr.net/npm/';</script>"
    )
    assert export_html.network_loads(page) == ["<script src> https://example.org/a.js", "<script src> //unpkg.com/b.js",
                                               "<script> https://cdn.jsdelivr.net/npm/", "cdn.jsdelivr.net", "unpkg.com"]
    assert export_html.network_loads('<script src="static/require.js"></script><a href="https://x.org">x</a>') == []


# one load of each kind the scan must see, on a host that is no known CDN (so only the structural check can find it)
_EVERY_KIND = [
    ('<link rel="stylesheet" href="https://h.example/a.css">', "<link href> https://h.example/a.css"),
    ('<link rel="preload" as="font" href="//h.example/f.woff2">', "<link href> //h.example/f.woff2"),
    ('<iframe src="http://h.example/frame"></iframe>', "<iframe src> http://h.example/frame"),
    ('<img srcset="local.png 1x, https://h.example/i.png 2x">', "<img srcset> https://h.example/i.png"),
    ('<script data-main="https://h.example/main.js" src="static/require.js"></script>', "<script data-main> https://h.example/main.js"),
    ('<div data-jupyter-widgets-cdn="//h.example/npm/"></div>', "<div data-jupyter-widgets-cdn> //h.example/npm/"),
    ('<style>@import url("https://h.example/b.css");</style>', "<style> https://h.example/b.css"),
    ("<style>@import 'https://h.example/c.css';</style>", "<style> https://h.example/c.css"),
    ("<style>@font-face { src: url(//h.example/f.ttf) format('truetype'); }</style>", "<style> //h.example/f.ttf"),
    ('<p style="background: url(\'https://h.example/bg.png\')">x</p>', "<p style> https://h.example/bg.png"),
    ('<script>require.config({"paths": {"d3": "https://h.example/d3"}});</script>', "<script> https://h.example/d3"),
    ('<iframe srcdoc="&lt;script src=&quot;https://h.example/s.js&quot;&gt;&lt;/script&gt;"></iframe>',
     "<iframe srcdoc> <script src> https://h.example/s.js"),
    ('<svg><image href="https://h.example/i.svg"/></svg>', "<image href> https://h.example/i.svg"),
]


@pytest.mark.parametrize(("snippet", "expected"), _EVERY_KIND, ids=[e.split(">")[0].strip("<") + ">" for _, e in _EVERY_KIND])
def test_network_loads_sees_every_kind_of_load(snippet: str, expected: str) -> None:
    """Each way a page fetches (stylesheet, font, iframe, srcset, data-*, CSS @import/url, require.config, srcdoc, SVG) is one finding."""
    assert export_html.network_loads(f"<html><body>{snippet}</body></html>") == [expected]


def test_network_loads_leaves_links_inline_data_and_bundled_widgets_alone() -> None:
    """Anchors, data: URIs, relative paths and widget state of the bundled modules load nothing; a third-party widget module does."""
    state: dict[str, Any] = {"version_major": 2, "version_minor": 0, "state": {
        "a": {"model_module": "@jupyter-widgets/controls", "model_module_version": "2.0.0", "model_name": "HTMLModel",
              "state": {"_view_module": "@jupyter-widgets/controls", "value": "<b>hi</b> <a href='https://x.org'>x</a>"}}}}
    page = ('<a href="//x.org/p">p</a><img src="data:image/png;base64,AAAA"><link rel="stylesheet" href="static/a.css">'
            '<style>.x { background: url(data:image/svg+xml;utf8,<svg/>); }</style>'
            f'<script type="{export_html.WIDGET_STATE}">{json.dumps(state)}</script>')
    assert export_html.network_loads(page) == []
    state["state"]["b"] = {"model_module": "bqplot", "model_module_version": "^0.5", "model_name": "FigureModel",
                           "state": {"_view_module": "bqplot", "_view_module_version": "^0.5"}}
    state["state"]["a"]["state"]["value"] = "<img src='https://h.example/x.png'>"
    page = f'<script type="{export_html.WIDGET_STATE}">{json.dumps(state)}</script>'
    assert export_html.network_loads(page) == [
        "widget HTMLModel.value: <img src> https://h.example/x.png",
        "widget module bqplot@^0.5 (not in the bundle: fetched from its CDN)",
    ]


def _notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from sim import scenarios\nfrom sim.viz import explorer\n"
            "run = scenarios.run('stale-owner-fenced', seed=0)\nexplorer(run, stills=3)"
        ),
        nbformat.v4.new_code_cell("import ipywidgets as w\nw.IntSlider(value=3, description='plain')"),
    ]
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    target = path / "small.ipynb"
    nbformat.write(nb, target)
    return target


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> object:
    """A small notebook with the explorer and a plain widget, executed headless once for the tests below."""
    base = tmp_path_factory.mktemp("export")
    mp = pytest.MonkeyPatch()
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        (base / name).mkdir()
        mp.setenv(name, str(base / name))
    mp.setenv("MPLBACKEND", "Agg")
    mp.setenv("PYTHONPATH", str(ROOT))
    try:
        notebook = _notebook(base)
        nb = nbformat.read(notebook, as_version=4)
        export_html.execute(nb, base)
    finally:
        mp.undo()
    return nb


def test_exported_page_loads_no_script_from_the_network(executed: object, tmp_path: Path) -> None:
    """The page's scripts are the local require.js and widget manager; nothing names a CDN."""
    page = export_html.render(executed)
    assert export_html.network_loads(page) == []
    assert re.findall(r'<script[^>]*\bsrc="([^"]+)"', page) == ["static/require.js"]
    assert "var widgetRendererSrc = 'static/html-manager/embed-amd.js';" in page
    assert "mathjax" not in page.lower()


def test_exported_page_points_the_widget_modules_at_the_local_fonts(executed: object) -> None:
    """require.js maps every @jupyter-widgets module beside embed-amd.js, where the bundle's CSS then finds its icon fonts.

    The bundle's named AMD modules derive their asset path (webpack's public path, the base of the
    Font Awesome urls) from their module URI: unmapped, ``@jupyter-widgets/controls`` resolves to
    ``<page>/@jupyter-widgets/`` and the Play button's icons draw as empty boxes.
    """
    page = export_html.render(executed)
    (config,) = re.findall(r"<script>\s*require\.config\((\{.*?\})\);\s*</script>", page, re.DOTALL)
    assert json.loads(config) == {"paths": {"@jupyter-widgets/html-manager/dist": "static/html-manager",
                                            "@jupyter-widgets": "static/html-manager"}}
    assert page.index("require.config(") < page.index("var widgetRendererSrc")
    assert export_html.WIDGET_RENDERER.rsplit("/", 1)[0] == "static/html-manager"


def test_exported_page_shows_the_explorer_frames_and_keeps_other_widgets(executed: object) -> None:
    """The explorer's output is its filmstrip (3 frames + lanes as inline PNGs); the plain slider stays a widget view."""
    page = export_html.render(executed)
    assert page.count('<figure class="casty-still"') == 3
    assert len(re.findall(r'<img alt="the cluster at t = [0-9.]+ s" src="data:image/png;base64,', page)) == 3
    assert len(re.findall(r'<img alt="the lanes of the whole run" class="casty-lanes" src="data:image/png;base64,', page)) == 1
    assert page.count('<script type="application/vnd.jupyter.widget-view+json">') == 1
    assert 'type="application/vnd.jupyter.widget-state+json"' in page


def test_a_saved_control_says_it_moves_nothing(executed: Any) -> None:
    """Right after the plain slider's view comes one output saying it moves nothing without a kernel; the explorer (frames instead) gets none."""
    page = export_html.render(executed)
    assert page.count('<p class="casty-static-note">') == 1
    note = page.index('<p class="casty-static-note">')
    view = page.rindex('<script type="application/vnd.jupyter.widget-view+json">', 0, note)
    assert view > page.rindex("casty-explorer-static", 0, note) and "jp-OutputArea-child" in page[view:note]
    state = executed.metadata["widgets"][export_html.WIDGET_STATE]["state"]
    sliders = [k for k, m in state.items() if m["model_name"] == "IntSliderModel" and m["state"].get("description") == "plain"]
    assert [export_html.controls_in(state, k) for k in sliders] == [["IntSliderModel"]]
    assert [len(c.outputs) for c in executed.cells] == [1, 1]  # the note is added to the page's copy only


def _png_size(data: str) -> tuple[int, int]:
    raw = base64.b64decode(data)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])
    return width, height


def test_the_static_copy_is_drawn_for_reading_not_at_the_live_panels_72_dpi(executed: object) -> None:
    """The stills are 1.5x the 340 px they show at and the lanes are the inline charts' 100 dpi (72 dpi: 8 px labels, blurred).

    Measured on the screenshots: at 72 dpi the static lanes were a 900 px raster with a cursor line at
    its right edge; now a 1250 px chart with no veil or cursor, as sharp as the other figures of the page.
    """
    page = export_html.render(executed)
    stills = re.findall(r'<img alt="the cluster at t = [0-9.]+ s" src="data:image/png;base64,([^"]+)"', page)
    assert {_png_size(s) for s in stills} == {(528, 484)}
    (lanes,) = re.findall(r'class="casty-lanes" src="data:image/png;base64,([^"]+)"', page)
    assert _png_size(lanes) == (1250, 600)


def test_a_markdown_code_block_is_shaded_like_code() -> None:
    """A fenced block in a markdown cell renders as highlighted <pre> under the offline template's shading rule (seen unshaded in 06-08)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("Before:\n\n```python\nx = 1\n```\nAfter.")]
    page = export_html.render(nb)
    assert '<div class="highlight"><pre><span></span><span class="n">x</span>' in page
    assert re.search(r"\.jp-RenderedMarkdown \.highlight pre \{ background: var\(--jp-cell-editor-background", page)


def test_the_stock_template_would_fail_the_check(executed: Any) -> None:
    """The check has teeth: nbconvert's own lab template loads require.js and MathJax from CDNs."""
    from nbconvert import HTMLExporter

    page, _ = HTMLExporter(template_name="lab").from_notebook_node(executed)  # type: ignore[no-untyped-call]
    remote = export_html.network_loads(page)
    assert remote[0] == "<script src> https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"
    assert "<script> https://unpkg.com/@jupyter-widgets/html-manager@*/dist/embed-amd.js" in remote
    assert "<script src> https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML-full,Safe" in remote
    assert any(found.startswith("<script> https://cdnjs.cloudflare.com/ajax/libs/mermaid/") for found in remote)
    assert remote[-2:] == ["cdnjs.cloudflare.com", "unpkg.com"]


def test_export_writes_the_page_and_refuses_a_network_script(executed: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """export() writes OUT/<name>.html; a page that would load from the network is refused, naming the address."""
    source = tmp_path / "done.ipynb"
    nbformat.write(executed, source)
    target = export_html.export(source, tmp_path / "html", run=False)
    assert target == tmp_path / "html" / "done.html"
    assert target.read_text(encoding="utf-8").count('<figure class="casty-still"') == 3
    monkeypatch.setattr(export_html, "REQUIRE_JS", "https://cdn.example.com/require.js")
    with pytest.raises(RuntimeError, match=r"done.ipynb: the page would load from the network: <script src> https://cdn.example.com/require.js"):
        export_html.export(source, tmp_path / "html", run=False)


def _npm(base: Path, fonts: list[str]) -> Path:
    """A stand-in npm folder: require.js, and a dist whose bundle loads two fonts; only ``fonts`` are present."""
    (base / "requirejs" / "package").mkdir(parents=True)
    (base / "requirejs" / "package" / "require.js").write_text("var requirejs;", encoding="utf-8")
    dist = base / "html-manager" / "package" / "dist"
    dist.mkdir(parents=True)
    (dist / "embed-amd.js").write_text('e.exports=n.p+"1551f4f60c37af51121f.woff2"},9:(e,t,o)=>{e.exports=o.p + "be9ee23c0c6390141475.ttf"',
                                       encoding="utf-8")
    (dist / "embed-amd.js.map").write_text("{}", encoding="utf-8")
    for name in fonts:
        (dist / name).write_bytes(b"font")
    return base


def test_install_assets_copies_the_fonts_the_bundle_loads_and_refuses_a_missing_one(tmp_path: Path) -> None:
    """Both fonts named by the bundle land in static/html-manager/ (no .map); with one absent the install names it."""
    fonts = ["1551f4f60c37af51121f.woff2", "be9ee23c0c6390141475.ttf"]
    export_html.install_assets(_npm(tmp_path / "npm", fonts), tmp_path / "html")
    assert sorted(p.name for p in (tmp_path / "html" / "static" / "html-manager").iterdir()) == [*fonts, "embed-amd.js"]
    with pytest.raises(RuntimeError, match=r"not beside it in .*html-manager: be9ee23c0c6390141475.ttf$"):
        export_html.install_assets(_npm(tmp_path / "npm2", fonts[:1]), tmp_path / "html2")


def test_a_full_export_drops_the_pages_of_notebooks_that_are_gone(tmp_path: Path) -> None:
    """A page with no notebook any more is deleted (the full-export scan wants one page per notebook); the others stay."""
    for name in ("00_a.html", "01_b.html", "99_gone.html"):
        (tmp_path / name).write_text("x", encoding="utf-8")
    assert export_html.drop_stale(tmp_path, [Path("n/00_a.ipynb"), Path("n/01_b.ipynb")]) == [tmp_path / "99_gone.html"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00_a.html", "01_b.html"]


def test_one_failing_notebook_does_not_stop_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """main() exports every notebook it can, names the one whose cell raised, and exits 1."""
    good, bad = nbformat.v4.new_notebook(), nbformat.v4.new_notebook()
    good.cells, bad.cells = [nbformat.v4.new_code_cell("1 + 1")], [nbformat.v4.new_code_cell("raise KeyError('boom')")]
    for nb, name in ((bad, "00_bad.ipynb"), (good, "01_good.ipynb")):
        nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
        nbformat.write(nb, tmp_path / name)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        (tmp_path / name).mkdir()
        monkeypatch.setenv(name, str(tmp_path / name))
    npm = _npm(tmp_path / "npm", ["1551f4f60c37af51121f.woff2", "be9ee23c0c6390141475.ttf"])
    out = tmp_path / "html"
    code = export_html.main([str(tmp_path / "00_bad.ipynb"), str(tmp_path / "01_good.ipynb"), "--out", str(out), "--npm", str(npm)])
    assert code == 1
    assert sorted(p.name for p in out.glob("*.html")) == ["01_good.html"]
    err = capsys.readouterr().err
    assert "FAILED 00_bad.ipynb: CellExecutionError: KeyError: 'boom'" in err
    assert err.rstrip().endswith("1 of 2 notebooks not exported: 00_bad.ipynb")


NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_the_course_has_eleven_notebooks_to_export() -> None:
    """The page checks below cover chapters 00 to 10, one notebook each."""
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{n:02d}" for n in range(11)]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_page_loads_nothing_from_the_network(notebook: Path) -> None:
    """Each course notebook's page (template, markdown and code, rendered unexecuted: CI has no time to run all 11 twice) fetches nothing."""
    page = export_html.render(nbformat.read(notebook, as_version=4))
    assert export_html.network_loads(page) == []
    assert re.findall(r'<script[^>]*\bsrc="([^"]+)"', page) == ["static/require.js"]


EXPORTED = os.environ.get("CASTY_HTML_OUT")


@pytest.mark.skipif(not EXPORTED, reason="set CASTY_HTML_OUT to a `make html` output folder (the full export runs 11 notebooks, ~90 s)")
def test_every_exported_page_loads_nothing_from_the_network() -> None:
    """Every page of a real export (executed, widgets and the explorer's frames in it) fetches nothing remote, and every local script it loads is there."""
    out = Path(str(EXPORTED))
    pages = {p.stem: p.read_text(encoding="utf-8") for p in sorted(out.glob("*.html"))}
    assert sorted(pages) == [p.stem for p in NOTEBOOKS]
    found = {name: export_html.network_loads(page) for name, page in pages.items()}
    assert {name: loads for name, loads in found.items() if loads} == {}
    local = {src for page in pages.values() for src in re.findall(r"""<script[^>]*\bsrc=["']([^"']+)""", page)}
    local |= {src for page in pages.values() for src in re.findall(r"var widgetRendererSrc = '([^']+)';", page)}
    assert sorted(src for src in local if not (out / src).is_file()) == []
    assert (out / export_html.WIDGET_RENDERER).is_file() and (out / export_html.REQUIRE_JS).is_file()
