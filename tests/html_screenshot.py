"""Render an HTML file in headless chromium and read back the screenshot's pixels (tests and bench only).

Used to check that the self-contained coverage report really renders (charts drawn, not a
blank page). Pillow decodes the PNG.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from PIL import Image

from common import proc
from common.errors import PerfqError

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> str | None:
    """The first headless-capable browser on PATH, or None."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 2000, timeout: float = 90) -> Path:
    """Screenshot ``html`` with headless chromium into ``png``; PerfqError when it cannot."""
    browser = find_browser()
    if browser is None:
        raise PerfqError("no chromium on PATH (apt-get install chromium)")
    png.unlink(missing_ok=True)
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        f"--screenshot={png}",
        html.resolve().as_uri(),
    ]
    res = proc.run(cmd, timeout=timeout)
    if res.error and res.returncode is None and "timed out" in res.error:
        raise PerfqError(f"chromium did not finish within {timeout:.0f} s")
    if not png.exists():
        raise PerfqError(f"chromium wrote no screenshot (exit {res.returncode}): {res.last_line() or 'no output'}")
    return png


def read_png(path: Path) -> Image.Image:
    """The screenshot as an RGB image."""
    with Image.open(path) as img:
        return img.convert("RGB")


def count_color(pixels: Image.Image, hex_color: str, tolerance: int = 8) -> int:
    """Number of pixels within ``tolerance`` (per channel) of ``#rrggbb``."""
    rgb = [int(hex_color.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4)]
    data = pixels.convert("RGB").tobytes()  # three bytes a pixel (getdata is deprecated in Pillow 12)
    return sum(
        1
        for px in zip(data[0::3], data[1::3], data[2::3], strict=True)
        if all(abs(c - want) <= tolerance for c, want in zip(px, rgb, strict=True))
    )


def dump_dom(url: str, timeout: float = 90) -> str:
    """The DOM of ``url`` after its scripts ran, as headless chromium serializes it."""
    browser = find_browser()
    if browser is None:
        raise PerfqError("no chromium on PATH (apt-get install chromium)")
    res = proc.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000",
                    "--dump-dom", url], timeout=timeout)
    if not res.stdout.strip():
        raise PerfqError(f"chromium dumped no DOM (exit {res.returncode}): {res.last_line() or 'no output'}")
    return res.stdout
