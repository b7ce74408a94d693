"""Write GPT-2 yourself: seed 001's ten functions as exercises that picogpt checks.

`python -m picogpt.exercises new my_gpt.py` writes the file to fill in (template.py);
`python -m picogpt.exercises check my_gpt.py` loads it (`load_file`), checks each function
against picogpt.model in the seed's order (checks.py, on the inputs of cases.py, with the
slips and hints of hints.py), prints one line per function (`report_lines`) and, once all pass,
text from the learner's own generate (generation.py). Beyond the ten, `check_extras` checks
cross_attention, the 2017 encoder-decoder's, when the file has it (docs/couplet.md). The
command line is __main__.py's. Docs: docs/exercises.md.
"""

import traceback
import types
from pathlib import Path

from picogpt.errors import PicoGPTError, _, reason

from .cases import EXTRAS, FUNCTIONS, NOT_WRITTEN
from .checks import Result, check_all, check_extras
from .hints import HINTS

__all__ = ["FUNCTIONS", "Result", "check_all", "check_extras", "closing_line", "load_file",
           "report_lines"]


def load_file(path: str) -> types.ModuleType:
    """The learner's file as a module, run as Python runs an import (no bytecode is written
    beside it); a file that cannot be read or run is one PicoGPTError naming its line."""
    try:
        source = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PicoGPTError(_("there is no {file}; write one to fill in with: "
                             "python -m picogpt.exercises new {file}").format(file=path)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise PicoGPTError(_("cannot read {file} as UTF-8 text ({reason}).").format(
            file=path, reason=reason(e))) from None
    module = types.ModuleType(Path(path).stem)
    module.__file__ = path
    try:
        exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 (the learner's own file)
    except SyntaxError as e:
        raise PicoGPTError(_("{file} line {line}: {error}: {message}. Fix that line, then check "
                             "again.").format(file=path, line=e.lineno, error=type(e).__name__,
                                              message=e.msg)) from None
    except Exception as e:  # noqa: BLE001 (the learner's code ran at import and raised)
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
        line = frames[-1].lineno if frames else 0
        raise PicoGPTError(_("{file} line {line} raised {error} while the file was loaded: "
                             "{message}. Code outside the functions runs on every check; keep "
                             "it under if __name__ == \"__main__\":").format(
                                 file=path, line=line, error=type(e).__name__,
                                 message=str(e).splitlines()[0] if str(e) else "")) from None
    return module


def report_lines(results: list[Result], path: str) -> list[str]:
    """One line per function (passed, or what failed and where), each failure's hints on the
    lines below it, in the current language."""
    width = max(map(len, FUNCTIONS))
    lines = []
    for i, r in enumerate(results, 1):
        head = f"{i:2} {r.name:{width}}  "
        if r.passed:
            lines.append(head + _("passed"))
        elif r.name in EXTRAS and r.what == NOT_WRITTEN:  # optional: not written is no failure
            lines.append(head + _("optional, not checked: line {line} still raises "
                                  "NotImplementedError").format(**r.fields))
        else:
            fields = {**r.fields, "file": path, "name": r.name}
            what = _(r.what).format(**{k: _(v) if k == "case" else v for k, v in fields.items()})
            lines.append(head + (_("FAILED on {case}: {what}").format(case=_(r.fields["case"]),
                                                                       what=what)
                                 if "case" in r.fields else _("FAILED: {what}").format(what=what)))
            lines += ["   " + " " * width + _("  hint: {hint}").format(hint=_(HINTS[key]))
                      for key in r.hints]
        if r.stand_ins:
            lines.append("   " + " " * width + _("  (checked with picogpt's {names} in place of "
                                                 "yours, which failed above)").format(
                                                     names=", ".join(r.stand_ins)))
    return lines


def closing_line(results: list[Result]) -> str:
    """How many of the functions checked pass: the ten, and each extra the file has written (one
    that still raises NotImplementedError is not counted)."""
    checked = [r for r in results if r.name not in EXTRAS or r.what != NOT_WRITTEN]
    passed = sum(r.passed for r in checked)
    if passed == len(checked):
        return _("All {n} functions checked pass.").format(n=len(checked))
    return _("{passed} of the {n} functions checked pass.").format(passed=passed,
                                                                   n=len(checked))
