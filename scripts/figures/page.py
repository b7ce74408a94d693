"""Screenshots of the --explain page of a sampled run, in English and in Chinese.

    python -m scripts.figures.page docs --models_dir /tmp/demo/models --model_size demo

Runs `picogpt PROMPT --explain` with top-k sampling (so each step's bars before and after the
filters differ), opens the page in Debian's chromium through Playwright, and writes
inside-page.png (English) and inside-page-zh.png (Chinese) into the folder given. The Chinese
one needs a CJK font (Debian: fonts-noto-cjk).
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts.figures.common import stamp

PROMPT = "Everyone is permitted to copy and distribute"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the two PNG files")
    parser.add_argument("--models_dir", required=True)
    parser.add_argument("--model_size", default="124M")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    page_file = Path(tempfile.mkdtemp()) / "page.html"
    subprocess.run([str(Path(sys.executable).parent / "picogpt"), PROMPT, "--n_tokens", "8",
                    "--top_k", "40", "--temperature", "0.8", "--seed", "3", "--explain",
                    str(page_file), "--model_size", args.model_size, "--models_dir",
                    args.models_dir], check=True, capture_output=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for locale, name in (("en-US", "inside-page.png"), ("zh-CN", "inside-page-zh.png")):
            page = browser.new_page(locale=locale, viewport={"width": 1150, "height": 1700})
            page.goto(page_file.as_uri())
            page.select_option("#step", "1")
            page.screenshot(path=str(args.out / name))
            stamp(args.out / name)
            print(f"wrote {args.out / name}")
        browser.close()


if __name__ == "__main__":
    main()
