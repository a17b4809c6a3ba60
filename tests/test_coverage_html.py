"""The HTML coverage report renders in headless chromium (skipped when chromium is absent)."""

from __future__ import annotations

import pytest

from perfq.coverage.cli import collect_report
from perfq.coverage.render import ACCENT, COVERED, UNCOVERED, to_html
from tests.coverage_fixture_db import build_index, build_repo
from tests.html_screenshot import count_color, find_browser, read_png, screenshot


@pytest.mark.skipif(find_browser() is None, reason="needs chromium (apt-get install chromium)")
def test_html_report_renders_charts_in_chromium(tmp_path):
    build_repo(tmp_path / "repo")
    report = collect_report(tmp_path / "repo", build_index(tmp_path / "i.duckdb"), "180.days", [], None)
    page = tmp_path / "coverage.html"
    page.write_text(to_html(report))
    pixels = read_png(screenshot(page, tmp_path / "shot.png", width=1000, height=1200))
    assert pixels.size == (1000, 1200)
    # the three chart colours are drawn: top-uncovered bars, covered and uncovered segments
    assert count_color(pixels, ACCENT) > 500
    assert count_color(pixels, COVERED) > 200
    assert count_color(pixels, UNCOVERED) > 200


def test_html_without_rows_still_renders_text():
    from perfq.coverage.report import CoverageFacts, build_report

    page = to_html(build_report(CoverageFacts(), None))
    assert "nothing to show" in page and page.count("<svg") == 0 and "</html>" in page
