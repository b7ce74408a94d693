"""Run a command while every core is kept busy, then stop the load: does the suite pass on a
machine doing other work?

    python -m scripts.checks.busy -- bash .ci/run
    python -m scripts.checks.busy --workers 4 -- .venv/bin/python -m pytest tests/test_cli.py

One spinning process per core (or --workers), each at normal priority, started before the
command and stopped after it, however it ends (a failure, Ctrl-C). Prints the command's wall
time and the load to stderr and exits with the command's exit code.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

SPIN = "while True: pass"  # one core's worth of pure-Python work, no memory, no I/O


def run_busy(command: list[str], workers: int) -> int:
    """Run command with `workers` spinning processes beside it; its exit code."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
                for _ in range(workers)]
    start = time.monotonic()
    try:
        return subprocess.call(command)
    finally:
        seconds = time.monotonic() - start
        for spinner in spinners:
            os.killpg(spinner.pid, signal.SIGKILL)
            spinner.wait()
        print(f"busy: {' '.join(command)} ran {seconds:.0f} s beside {workers} spinning "
              f"processes on {os.cpu_count()} cores (load average then "
              f"{os.getloadavg()[0]:.1f})", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count(),
                        help="spinning processes (default: one per core)")
    parser.add_argument("command", nargs="+", help="the command to run, after --")
    args = parser.parse_args()
    sys.exit(run_busy(args.command, args.workers))


if __name__ == "__main__":
    main()
