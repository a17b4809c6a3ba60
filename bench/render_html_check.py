"""Check that the coverage HTML report renders in headless chromium (charts drawn, not blank).

Usage: python bench/render_html_check.py [--repo PYTORCH_TREE] [--db INDEX] [--out DIR]
Builds the HTML report (the real index by default, the test fixture with --fixture),
screenshots it with `chromium --headless`, decodes the PNG and counts the pixels of the
chart colours. Prints figures; exit status 1 when the page looks blank.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from perfq.common.paths import default_index_path
from perfq.coverage.cli import collect_report
from perfq.coverage.render import ACCENT, COVERED, UNCOVERED, to_html

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the screenshot helper lives with the tests
from tests.html_screenshot import count_color, read_png, screenshot  # noqa: E402

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
    report = collect_report(repo, db, "180.days", [], 200)
    html_path = out / "coverage.html"
    html_path.write_text(to_html(report))
    t0 = time.perf_counter()
    png = screenshot(html_path, out / "coverage.png")
    took = time.perf_counter() - t0
    pixels = read_png(png)
    counts = {
        name: count_color(pixels, color)
        for name, color in (("top-uncovered bars", ACCENT), ("covered bars", COVERED), ("uncovered bars", UNCOVERED))
    }
    distinct = len(set(pixels.reduce(8).getdata()))
    print(
        f"html: {html_path} ({html_path.stat().st_size} bytes); png: {png} "
        f"({pixels.width}x{pixels.height}, {png.stat().st_size} bytes), chromium {took:.1f} s"
    )
    for name, n in counts.items():
        print(f"  {name}: {n} px")
    print(f"  distinct colours (1/64 sample): {distinct}")
    ok = all(n > 500 for n in counts.values()) and distinct > 20
    print("renders: OK" if ok else "renders: BLANK OR BROKEN")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
