"""Screenshots of the --explain page of a sampled run and of the --explore page, in English and
in Chinese.

    python -m scripts.figures.page docs --models_dir /tmp/demo/models --model_size demo15

Runs `picogpt PROMPT --explain` with top-k sampling (so each step's bars before and after the
filters differ) and serves the --explore page on 127.0.0.1, opens both in Debian's chromium
through Playwright, and writes inside-page.png, explore-page.png (English) and their -zh twins
(Chinese) into the folder given. The Chinese ones need a CJK font (Debian: fonts-noto-cjk).
"""

import argparse
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from picogpt.files.loaded_model import load_model
from picogpt.web.server import ExploreServer
from picogpt.web.session import Session
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
        explore(browser, args)
        browser.close()


def explore(browser, args) -> None:
    """The --explore page on the same model and prompt, after the temperature slider moved to
    0.7 with top-k 40, its inside views drawn."""
    loaded = load_model(args.model_size, args.models_dir)
    server = ExploreServer(Session(loaded.encoder, loaded.hparams, loaded.params, loaded.about()),
                           0, PROMPT)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    for locale, name in (("en-US", "explore-page.png"), ("zh-CN", "explore-page-zh.png")):
        page = browser.new_page(locale=locale, viewport={"width": 1150, "height": 1500})
        page.goto(server.url)
        page.wait_for_function("document.querySelectorAll('#cands .p.after').length > 0")
        page.evaluate("""() => { for (const [id, value] of [["top_k", "40"], ["temperature",
            "0.7"]]) { const k = document.getElementById(id); k.value = value;
            k.dispatchEvent(new Event("input")); } }""")
        page.wait_for_timeout(1500)
        page.wait_for_function("window.pending === 0")
        page.screenshot(path=str(args.out / name))
        stamp(args.out / name)
        print(f"wrote {args.out / name}")
    server.shutdown()


if __name__ == "__main__":
    main()
