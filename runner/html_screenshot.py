"""Render an HTML file in headless chromium and read back the screenshot's pixels.

Used to check that the self-contained coverage report really renders (charts drawn, not a
blank page). The PNG reader handles what chromium writes: 8-bit RGB/RGBA, not interlaced.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np

from perfq.errors import PerfqError

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
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise PerfqError(f"chromium did not finish within {timeout:.0f} s") from None
    if not png.exists():
        tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise PerfqError(f"chromium wrote no screenshot (exit {proc.returncode}): {tail[0]}")
    return png


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read_png(path: Path) -> np.ndarray:
    """Pixels of an 8-bit RGB or RGBA PNG as an (height, width, channels) uint8 array."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise PerfqError(f"{path} is not a PNG file")
    pos, idat = 8, bytearray()
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                raise PerfqError(f"{path}: unsupported PNG (depth {depth}, color type {color})")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(bytes(idat))
    stride = width * channels
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        start = y * (stride + 1)
        ftype = raw[start]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=start + 1).astype(np.int32)
        if ftype == 0:
            cur = line
        elif ftype == 1:  # Sub: cumulative per channel
            cur = np.cumsum(line.reshape(width, channels), axis=0).reshape(-1) % 256
        elif ftype == 2:  # Up
            cur = (line + prev) % 256
        else:  # Average / Paeth: sequential
            cur = np.zeros(stride, dtype=np.int32)
            vals, up = line.tolist(), prev.tolist()
            res = [0] * stride
            for i in range(stride):
                left = res[i - channels] if i >= channels else 0
                if ftype == 3:
                    res[i] = (vals[i] + ((left + up[i]) >> 1)) & 255
                else:
                    ul = up[i - channels] if i >= channels else 0
                    res[i] = (vals[i] + _paeth(left, up[i], ul)) & 255
            cur = np.array(res, dtype=np.int32)
        out[y] = cur
        prev = cur
    return out.reshape(height, width, channels)


def count_color(pixels: np.ndarray, hex_color: str, tolerance: int = 8) -> int:
    """Number of pixels within ``tolerance`` (per channel) of ``#rrggbb``."""
    rgb = np.array([int(hex_color.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4)], dtype=np.int32)
    diff = np.abs(pixels[..., :3].astype(np.int32) - rgb)
    return int(np.all(diff <= tolerance, axis=-1).sum())
