"""Screenshots of a couplet model's --explain page, in English and in Chinese: the pair, then
its cross-attention and the 对位 scores.

    python -m scripts.figures.couplet_page docs --models_dir /tmp/couplet/models --model_size dui

Runs `picogpt 海阔凭鱼跃 --explain` (greedy) on the couplet model that `python -m picogpt.train
--task couplet` wrote, opens the page in Debian's chromium through Playwright, chooses the
cross-attention head with the highest 对位 score, and writes inside-couplet.png (English) and
inside-couplet-zh.png (Chinese) into the folder given: the page from the pair down to the
cross-attention, with the encoder's and the decoder's self-attention left out of the picture
(they are on the page, above the cross-attention). The Chinese one needs a CJK font (Debian:
fonts-noto-cjk). It prints each head's 对位 score.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts.figures.common import stamp

FIRST = "海阔凭鱼跃"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the two PNG files")
    parser.add_argument("--models_dir", required=True)
    parser.add_argument("--model_size", default="dui")
    parser.add_argument("--first", default=FIRST, help="the 上句")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    page_file = Path(tempfile.mkdtemp()) / "page.html"
    done = subprocess.run([str(Path(sys.executable).parent / "picogpt"), args.first,
                           "--top_k", "1", "--explain", str(page_file), "--model_size",
                           args.model_size, "--models_dir", args.models_dir],
                          check=True, capture_output=True, text=True)
    print(f"{args.first}，{done.stdout.strip()}")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        for locale, name in (("en-US", "inside-couplet.png"), ("zh-CN", "inside-couplet-zh.png")):
            page = browser.new_page(locale=locale, viewport={"width": 1000, "height": 900})
            page.goto(page_file.as_uri())
            scores = page.evaluate("DATA.same_position")
            best = max(((layer, head) for layer, row in enumerate(scores)
                        for head in range(len(row))), key=lambda at: scores[at[0]][at[1]])
            page.select_option("#cross-layer", str(best[0]))
            page.select_option("#cross-head", str(best[1]))
            # the pair and the cross-attention, the two self-attention panels out of the picture
            page.evaluate("""() => { for (const kind of ['enc', 'dec']) {
                const panel = document.getElementById(kind + '-panel');
                for (const node of [panel.previousElementSibling.previousElementSibling,
                                    panel.previousElementSibling, panel])
                    node.style.display = 'none'; } }""")
            top = page.locator("#title").bounding_box()["y"] - 8
            end = page.locator("#same").bounding_box()
            height = end["y"] + end["height"] + 12 - top
            page.screenshot(path=str(args.out / name), full_page=True,
                            clip={"x": 0, "y": top, "width": 1000, "height": height})
            stamp(args.out / name)
            print(f"wrote {args.out / name}")
        browser.close()
    print("对位, decoder layer by head:", scores)


if __name__ == "__main__":
    main()
