"""Render a report in headless Chromium to a PNG, to look at it as a reader does.

    python scripts/screenshot_report.py results/showcase/<run_id>/report.html
    python scripts/screenshot_report.py REPORT.html --out page.png --width 1400 --expand
    python scripts/screenshot_report.py REPORT.html --first-screen   # 1400×900, as it opens

Needs a Chromium binary (Debian: ``apt-get install chromium``; or set ``CHROMIUM``). The page is
rendered in a tall window and the blank space below the content is trimmed, so the PNG's height
is the page's height; ``--expand`` opens every collapsed ``<details>`` first;
``--first-screen`` keeps the first 1400×900 pixels only, what a laptop shows as the page opens,
and says where the report's first figure lies. Prints the PNG's path, its size in pixels and the
HTML file's size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--disable-quic"]


def find_chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def trim_bottom(png: Path) -> tuple[int, int]:
    """Cut the blank rows under the content; returns the new ``(width, height)``."""
    from PIL import Image, ImageChops

    image = Image.open(png).convert("RGB")
    background = Image.new("RGB", image.size, image.getpixel((image.width - 1,
                                                               image.height - 1)))
    box = ImageChops.difference(image, background).getbbox()
    if box is not None:
        image = image.crop((0, 0, image.width, min(image.height, box[3] + 24)))
        image.save(png)
    return image.size


def _chromium() -> str:
    """The Chromium binary, or exit with what to install."""
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("screenshot_report: no Chromium found; install it (Debian: apt-get "
                         "install chromium) or set CHROMIUM=/path/to/chrome")
    return chromium


def screenshot(html: Path, out: Path, *, width: int = 1400, height: int = 60000,
               expand: bool = False, trim: bool = True) -> tuple[int, int]:
    """``html`` rendered in a ``width × height`` window to the PNG ``out``; with ``trim`` the
    blank rows under the content are cut. Returns the PNG's ``(width, height)``."""
    chromium = _chromium()
    source = html.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        if expand:
            page = source.read_text(encoding="utf-8").replace("<details>", "<details open>")
            source = Path(tmp) / "page.html"
            source.write_text(page, encoding="utf-8")
        subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp}/profile",
                        f"--window-size={width},{height}", f"--screenshot={out.resolve()}",
                        source.as_uri()], check=True, capture_output=True, timeout=180)
    return trim_bottom(out) if trim else (width, height)


_MEASURE = """<script>addEventListener("load", () => {{
  const el = document.querySelector({selector!r});
  const box = el ? el.getBoundingClientRect() : null;
  const img = el && el.tagName === "IMG" ? el : el ? el.querySelector("img") : null;
  document.body.setAttribute("data-box", JSON.stringify(box && {{top: box.top,
    bottom: box.bottom, left: box.left, right: box.right,
    loaded: img ? img.complete && img.naturalWidth > 0 : null}}));
}});</script>"""


def element_box(html: Path, selector: str, *, width: int = 1400, height: int = 900
                ) -> dict[str, float] | None:
    """Where the first element matching the CSS ``selector`` lies in a ``width × height``
    window, once the page has loaded: ``{"top", "bottom", "left", "right"}`` in CSS pixels
    (and ``"loaded"``: whether its image has loaded), or ``None`` when there is none. The
    page is measured in a copy with a script added; the report itself has none."""
    import json
    import re

    chromium = _chromium()
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(html.read_text(encoding="utf-8").replace(
            "</body>", _MEASURE.format(selector=selector) + "</body>"), encoding="utf-8")
        out = subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp}/profile",
                              f"--window-size={width},{height}", "--virtual-time-budget=5000",
                              "--dump-dom", page.as_uri()],
                             check=True, capture_output=True, text=True, timeout=180).stdout
    found = re.search(r'data-box="([^"]*)"', out)
    if found is None:
        raise RuntimeError("screenshot_report: the page was not measured (no data-box)")
    import html as html_module

    return json.loads(html_module.unescape(found.group(1)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path, help="a report.html (or compare.html)")
    parser.add_argument("--out", type=Path, help="PNG to write (default: next to the HTML)")
    parser.add_argument("--width", type=int, default=1400, help="window width in pixels")
    parser.add_argument("--expand", action="store_true", help="open every <details> first")
    parser.add_argument("--first-screen", action="store_true",
                        help="only the first 1400x900 pixels, and where the first figure lies")
    args = parser.parse_args(argv)
    if not args.html.is_file():
        print(f"screenshot_report: {args.html}: no such file", file=sys.stderr)
        return 2
    if args.first_screen:
        out = args.out or args.html.with_suffix(".first-screen.png")
        screenshot(args.html, out, width=1400, height=900, trim=False)
        box = element_box(args.html, "figure img")
        where = ("no figure" if box is None else
                 f"first figure at y {box['top']:.0f}-{box['bottom']:.0f} px")
        print(f"{out}  1400x900 px  ({where})")
        return 0
    out = args.out or args.html.with_suffix(".expanded.png" if args.expand else ".png")
    w, h = screenshot(args.html, out, width=args.width, expand=args.expand)
    print(f"{out}  {w}x{h} px  (HTML {args.html.stat().st_size / 2**20:.2f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
