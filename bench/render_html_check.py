"""Check that the coverage HTML report renders in headless chromium (charts drawn, not blank).

Usage: python bench/render_html_check.py [--repo PYTORCH_TREE] [--db INDEX] [--out DIR]
Builds the HTML report (the real index by default, the test fixture with --fixture),
screenshots its first screen at 1280 px with `chromium --headless` (the coverage column must be
drawn in the left half) and its charts, decodes the PNGs and counts the pixels of the colours.
Prints figures; exit status 1 when the page looks blank or the coverage column is not on screen.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from common.paths import default_index_path
from perfq.coverage.pipeline import CoverageRequest, coverage_report
from perfq.coverage.render import ACCENT, COVERED, UNCOVERED, to_html

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the screenshot helper lives with the tests
from tests.html_screenshot import count_color, read_png, screenshot  # noqa: E402

NOB_RED = "#c62828"  # the NO BENCHMARK text
CORPUS = Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=CORPUS)
    ap.add_argument("--db", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None, help="keep the HTML and PNG here")
    ap.add_argument("--fixture", action="store_true", help="use the small test fixture instead")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="perfq-cov-html-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.fixture:
        from tests.coverage_fixture_db import build_index, build_repo

        repo, db = out / "repo", out / "index.duckdb"
        if not repo.exists():
            build_repo(repo)
        build_index(db)
    else:
        repo, db = args.repo, args.db or default_index_path(args.repo)
    report = coverage_report(CoverageRequest(repo, db, infra_ops=200))
    html_path = out / "coverage.html"
    html_path.write_text(to_html(report, link_base=repo.resolve().as_uri()))
    t0 = time.perf_counter()
    first = read_png(screenshot(html_path, out / "first-screen.png", width=1280, height=800))
    took = time.perf_counter() - t0
    # the first screen at 1280 px: the coverage column (red NO BENCHMARK) in its left half
    red_left = count_color(first.crop((0, 0, 640, 800)), NOB_RED, tolerance=40)
    # the charts, on a page without table rows (they rank every operator regardless of --top)
    charts_path = out / "charts.html"
    charts_path.write_text(to_html(coverage_report(CoverageRequest(repo, db, infra_ops=0))))
    pixels = read_png(screenshot(charts_path, out / "charts.png", width=1280, height=2000))
    counts = {
        name: count_color(pixels, color)
        for name, color in (("top-uncovered bars", ACCENT), ("covered bars", COVERED), ("uncovered bars", UNCOVERED))
    }
    distinct = len(set(pixels.reduce(8).getdata()))
    print(f"html: {html_path} ({html_path.stat().st_size} bytes, {len(report.rows)} rows); chromium {took:.1f} s")
    print(f"  first screen 1280x800: {red_left} px of NO BENCHMARK red in the left half (the coverage column)")
    for name, n in counts.items():
        print(f"  charts: {name}: {n} px")
    print(f"  charts: distinct colours (1/64 sample): {distinct}")
    ok = red_left > 150 and all(n > 500 for n in counts.values()) and distinct > 20
    print("renders: OK" if ok else "renders: BLANK OR BROKEN")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
