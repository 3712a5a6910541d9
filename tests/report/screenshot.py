"""Test-side HTML renderer: a headless Chromium screenshot of a report (apt-get install chromium).

Run by hand to look at a report: python -m tests.report.screenshot REPORT.html OUT.png
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def browser() -> str | None:
    for name in BROWSERS:
        exe = shutil.which(name)
        if exe:
            return exe
    return None


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 2400, timeout: float = 120) -> Path:
    exe = browser()
    if exe is None:
        raise FileNotFoundError("no headless Chromium (apt-get install chromium)")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--window-size={width},{height}", f"--screenshot={png}", Path(html).resolve().as_uri()]
    subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)
    return png


if __name__ == "__main__":
    print(screenshot(Path(sys.argv[1]), Path(sys.argv[2])))
