"""The HTML coverage report in headless chromium (skipped when chromium is absent): charts drawn,
the coverage column visible at 1280 px, sort and filter working, links to sources, full labels."""

from __future__ import annotations

import re

import pytest

from perfq.coverage.pipeline import CoverageRequest, coverage_report
from perfq.coverage.render import ACCENT, COVERED, UNCOVERED, to_html
from tests.coverage_fixture_db import build_index, build_repo
from tests.html_screenshot import count_color, dump_dom, find_browser, read_png, screenshot

needs_chromium = pytest.mark.skipif(find_browser() is None, reason="needs chromium (apt-get install chromium)")
BLOB = "https://github.com/pytorch/pytorch/blob/v2.6.0"
NOB_RED = "#c62828"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cov-html")
    build_repo(tmp / "repo")
    return coverage_report(CoverageRequest(tmp / "repo", build_index(tmp / "i.duckdb")))


@needs_chromium
def test_html_report_renders_charts_in_chromium(tmp_path, report):
    page = tmp_path / "coverage.html"
    page.write_text(to_html(report))
    pixels = read_png(screenshot(page, tmp_path / "shot.png", width=1000, height=1600))
    assert pixels.size == (1000, 1600)
    # the three chart colours are drawn: top-uncovered bars, covered and uncovered segments
    assert count_color(pixels, ACCENT) > 500
    assert count_color(pixels, COVERED) > 200
    assert count_color(pixels, UNCOVERED) > 200


@needs_chromium
def test_coverage_column_is_visible_at_1280_px(tmp_path, report):
    page = tmp_path / "coverage.html"
    page.write_text(to_html(report, link_base=BLOB))
    pixels = read_png(screenshot(page, tmp_path / "shot.png", width=1280, height=800))
    left = pixels.crop((0, 0, 640, 800))
    # NO BENCHMARK (bold red) is drawn in the left half of the first screen: the first column
    assert count_color(left, NOB_RED, tolerance=40) > 150
    assert count_color(pixels.crop((640, 0, 1280, 800)), NOB_RED, tolerance=40) < 20


@needs_chromium
def test_sort_and_filter_run_in_the_browser(tmp_path, report):
    page = tmp_path / "coverage.html"
    page.write_text(to_html(report))
    dom = dump_dom(page.as_uri())
    assert "5 of 5 operators shown" in dom  # the script ran

    def visible_ops(fragment: str) -> list[str]:
        body = dump_dom(page.as_uri() + fragment).split('<tbody>', 1)[1]
        rows = re.findall(r"<tr ([^>]*)>(.*?)</tr>", body, re.S)
        return [re.search(r"<code>(\w+)</code>", cells).group(1) for attrs, cells in rows if "hidden" not in attrs]

    assert visible_ops("#nob=1") == ["lerp", "relu", "addcmul"]
    assert visible_ops("#q=softmax") == ["softmax"]
    assert visible_ops("#sort=4:desc") == ["softmax", "lerp", "add", "relu", "addcmul"]  # kernel lines
    assert visible_ops("#sort=2:asc") == ["add", "addcmul", "lerp", "relu", "softmax"]  # operator names
    assert visible_ops("#nob=1&sort=3:desc&q=l") == ["lerp", "relu", "addcmul"]


def test_links_and_full_chart_labels(report):
    page = to_html(report, link_base=BLOB)
    assert f'<a href="{BLOB}/aten/src/ATen/native/Lerp.cpp#L1"><code>lerp</code></a>' in page
    assert f'href="{BLOB}/benchmarks/operator_benchmark/pt/add_test.py">add_test (traced)</a>' in page
    assert ">aten/src/ATen/native/cuda</text>" in page and ">CompositeImplicitAutograd</text>" in page
    assert "<script>" in page and "http" not in to_html(report).replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_html_without_rows_still_renders_text():
    from perfq.coverage.report import CoverageFacts, build_report

    page = to_html(build_report(CoverageFacts(), None))
    assert "nothing to show" in page and page.count("<svg") == 0 and "</html>" in page
