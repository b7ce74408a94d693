"""Peak memory of the inside views on a long prompt: `--explain` and the explore page's inside call.

    python -m scripts.benchmarks.inside_memory --models_dir /tmp/bench/models --prompt_file p.txt
    python -m scripts.benchmarks.inside_memory ... --before /tmp/old   # another checkout too

Each runs the real command in a child process and reads its peak resident memory from the
kernel when it ends (os.wait4's ru_maxrss, the figure `/usr/bin/time -v` prints as "Maximum
resident set size"):

- `python -m picogpt --prompt_file P --n_tokens 8 --explain e.html` (and the same without
  --explain, the generation alone);
- `python -m picogpt --explore --no_browser --prompt_file P`, asked once for /api/inside as the
  page asks after an edit, then stopped with Ctrl-C (SIGINT).

Figures in kB (1,024 bytes, as time -v gives them), in MB (10^6 bytes) and as a multiple of the
weights' bytes (the checkpoint's data file).
"""

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import ROOT, BenchmarkError


def peak_kb(process: subprocess.Popen) -> int:
    """Wait for process to end: its peak resident memory in kB. A failure raises."""
    _pid, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 130):  # 130: stopped by Ctrl-C, as asked
        raise BenchmarkError(f"{process.args} exited {process.returncode}:\n"
                             f"{process.stderr.read()[-3000:] if process.stderr else ''}")
    return usage.ru_maxrss


def explain(checkout: Path, flags: list[str], page: Path | None) -> int:
    """Peak kB of one generation of 8 tokens, writing page with --explain when given."""
    args = [*flags, "--n_tokens", "8", *(["--explain", str(page)] if page else [])]
    process = subprocess.Popen([sys.executable, "-m", "picogpt", *args], cwd=checkout,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return peak_kb(process)


def explore_inside(checkout: Path, flags: list[str]) -> tuple[int, int]:
    """Peak kB of an explore server that set the prompt and answered one /api/inside; and the
    number of positions the answer's attention covers, as a check that it answered."""
    process = subprocess.Popen([sys.executable, "-m", "picogpt", "--explore", "--no_browser",
                                *flags], cwd=checkout, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    url = process.stdout.readline().strip()  # http://127.0.0.1:PORT/?token=SECRET
    if not url:
        peak_kb(process)
        raise BenchmarkError("the explore server printed no address")
    host, secret = url.split("/")[2], url.split("token=")[1]
    connection = http.client.HTTPConnection(*host.split(":"), timeout=3600)
    connection.request("POST", "/api/inside", "{}", {"Host": host, "X-Picogpt-Token": secret,
                                                     "Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    if response.status != 200:
        process.kill()
        raise BenchmarkError(f"/api/inside answered {response.status}: {answer}")
    process.send_signal(signal.SIGINT)
    return peak_kb(process), answer["attention"]["first"] + answer["attention"]["n"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models_dir", required=True)
    parser.add_argument("--model_size", default="124M")
    parser.add_argument("--prompt_file", required=True)
    parser.add_argument("--before", type=Path, default=None,
                        help="another checkout whose picogpt is measured too, as 'before'")
    args = parser.parse_args()
    flags = ["--prompt_file", str(Path(args.prompt_file).resolve()), "--model_size",
             args.model_size, "--models_dir", str(Path(args.models_dir).resolve())]
    weights = (Path(args.models_dir) / args.model_size /
               "model.ckpt.data-00000-of-00001").stat().st_size
    checkouts = {"after": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    print(f"weights {weights / 1e6:.1f} MB; load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        for name, checkout in checkouts.items():
            pages = {"generation alone": None, "--explain": Path(folder) / f"{name}.html"}
            for what, page in pages.items():
                report(name, what, explain(checkout, flags, page), weights)
            kb, n_seq = explore_inside(checkout, flags)
            report(name, f"explore, /api/inside ({n_seq} positions)", kb, weights)
        if args.before:
            same = (Path(folder) / "after.html").read_bytes() == (
                Path(folder) / "before.html").read_bytes()
            print(f"the two --explain pages are {'the same' if same else 'DIFFERENT'}")


def report(name: str, what: str, kb: int, weights: int) -> None:
    print(f"{name:>7}  {what:<40} {kb:>10,} kB  {kb * 1024 / 1e6:7.1f} MB  "
          f"{kb * 1024 / weights:.2f}x the weights", flush=True)


if __name__ == "__main__":
    main()
