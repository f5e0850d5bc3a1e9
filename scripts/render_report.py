"""Build the Snakemake report of a finished suite and check it in a real headless browser (Chromium):

    .venv/bin/python scripts/render_report.py                          # the demo: config/demo.yaml
    .venv/bin/python scripts/render_report.py --configfile config/config.yaml --report results/report.html

It runs ``snakemake all --report REPORT --configfile CONFIG`` (unless ``--no-build``), opens the page in Chromium
(driven by Playwright; the browser is the system's ``chromium``, or ``--chromium PATH``), and checks, as a reader
would see it: the page loads without script errors, its menu lists the "Tables" and "Figures" categories, every
table (``tables/<name>.html``) and every figure (``figures/<name>.png`` and its CSV) of the config is in the report,
each figure shows as a decoded image and each table as a page holding a table.  With ``--screenshots DIR`` it
saves a PNG of the landing page, of each category and of every figure and table view.  Exit status 0 when every
check passes; the problems are printed otherwise.

Needs: ``pip install playwright`` (Python package only: no browser download, the system Chromium is used) and
Chromium (Debian: ``apt-get install chromium``)."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def find_chromium(explicit: str | None = None) -> str | None:
    """The Chromium executable: ``explicit``, ``$CHROMIUM``, or ``chromium`` / ``chromium-browser`` /
    ``google-chrome`` on the PATH; None when there is none."""
    for candidate in (explicit, os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if candidate and (shutil.which(candidate) or Path(candidate).is_file()):
            return shutil.which(candidate) or candidate
    return None


def expected_entries(config: dict) -> dict[str, list[str]]:
    """The report entries a suite config must produce: file names per category."""
    sys.path.insert(0, str(ROOT))
    from dmp.figures.plan import FigurePlan

    plan = FigurePlan(config)
    return {"Tables": [f"{t}.html" for t in config.get("tables", {})],
            "Figures": [f"{n}.{ext}" for n in plan.names for ext in ("png", "csv")]}


def build_report(configfile: str, report: str, extra=()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "all", "--report", report, "--configfile", configfile,
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=1200)


def check_report(report: str, expected: dict[str, list[str]], chromium: str, screenshots: str | None = None,
                 timeout_ms: int = 60000) -> list[str]:
    """Open ``report`` in headless Chromium and return the problems found (empty: all checks passed)."""
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    shots = Path(screenshots) if screenshots else None
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        url = Path(report).resolve().as_uri()

        def load():
            page.goto(url, timeout=timeout_ms)
            page.wait_for_function("typeof app !== 'undefined' && document.querySelector('#app').innerText.length > 0",
                                   timeout=timeout_ms)

        load()
        if shots:
            page.screenshot(path=str(shots / "00_landing.png"))
        results = page.evaluate("results")
        by_name = {}
        for path, entry in results.items():
            by_name.setdefault(entry["name"], []).append((path, entry))
        for category, names in expected.items():
            load()  # back to the landing page and its menu
            menu = page.get_by_text(category, exact=True)
            if menu.count() == 0:
                problems.append(f"the report's menu has no category {category!r}")
                continue
            menu.first.click()
            page.wait_for_timeout(300)
            if shots:
                page.screenshot(path=str(shots / f"01_{category.lower()}.png"))
            text = page.inner_text("body")
            for name in names:
                if name not in by_name:
                    problems.append(f"{category}: {name} is not in the report")
                    continue
                path, entry = by_name[name][0]
                label = (entry.get("labels") or {}).get("figure") or (entry.get("labels") or {}).get("table")
                if label and label not in text:
                    problems.append(f"{category}: {name} is not listed on the category page")
                problems += _check_view(page, path, entry, shots, timeout_ms)
        problems += [f"script error on the page: {e}" for e in errors]
        browser.close()
    return problems


def _check_view(page, path: str, entry: dict, shots: Path | None, timeout_ms: int) -> list[str]:
    """Show one result as its eye button does and check what the browser renders."""
    mime, name = entry["mime_type"], entry["name"]
    kind = {"image/png": "img", "image/svg+xml": "img", "image/jpeg": "img", "text/html": "html"}.get(mime)
    if kind is None:  # offered as a download (CSV): it must carry its data
        return [] if entry.get("data_uri") else [f"{name}: no data"]
    page.evaluate("([kind, uri, path]) => app.setView({content: kind, contentPath: uri, resultPath: path})",
                  [kind, entry["data_uri"], path])
    problems = []
    if kind == "img":
        try:
            page.wait_for_function("(uri) => { const i = [...document.images].find(i => i.src === uri || "
                                   "i.getAttribute('src') === uri); return i && i.complete && i.naturalWidth > 0 }",
                                   arg=entry["data_uri"], timeout=timeout_ms)
        except Exception:
            problems.append(f"{name}: the image does not render")
    else:
        try:
            frame_el = page.wait_for_selector("iframe", timeout=timeout_ms)
            frame = frame_el.content_frame()
            frame.wait_for_selector("table", timeout=timeout_ms)
            if frame.locator("td").count() == 0:
                problems.append(f"{name}: the table page has no cells")
        except Exception:
            problems.append(f"{name}: the table page does not render")
    if shots:
        page.screenshot(path=str(shots / f"view_{name.replace('/', '_')}.png"))
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configfile", default="config/demo.yaml", help="suite config (default: the demo)")
    parser.add_argument("--report", help="report file, .html or .zip (default: <results>/report.html)")
    parser.add_argument("--no-build", action="store_true", help="check an existing report, do not rebuild it")
    parser.add_argument("--chromium", help="Chromium executable (default: $CHROMIUM or chromium on the PATH)")
    parser.add_argument("--screenshots", help="save screenshots of every view in this folder")
    args = parser.parse_args(argv)
    config = yaml.safe_load((ROOT / args.configfile).read_text())
    report = args.report or f"{config.get('results', 'results')}/report.html"
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print("error: no Chromium found (apt-get install chromium, or --chromium PATH)", file=sys.stderr)
        return 2
    if not args.no_build:
        proc = build_report(args.configfile, report)
        if proc.returncode != 0:
            print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
            print(f"error: `snakemake all --report {report}` failed (has `snakemake all` run to the end?)",
                  file=sys.stderr)
            return 1
    page = ROOT / report
    with tempfile.TemporaryDirectory(prefix="report_") as unpacked:
        if page.suffix == ".zip":  # the zipped report: a folder holding report.html and data/
            zipfile.ZipFile(page).extractall(unpacked)
            page = next(Path(unpacked).rglob("report.html"))
        problems = check_report(str(page), expected_entries(config), chromium, args.screenshots)
    for p in problems:
        print(f"FAIL {p}")
    n = sum(len(v) for v in expected_entries(config).values())
    print(f"{report}: {'ok' if not problems else f'{len(problems)} problem(s)'} ({n} tables and figure files checked "
          f"in {chromium})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
