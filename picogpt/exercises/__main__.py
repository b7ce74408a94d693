"""The command line of the exercises: `python -m picogpt.exercises new FILE` and
`python -m picogpt.exercises check FILE`.

The first word chooses the command and its flags go through the house's checked parser. The
exit code is 0 when every function passes, 1 for a failure or anything wrong with what was given
(one line, no traceback), 130 on Ctrl-C.
"""

import contextlib
import sys

import fire

from picogpt.cli.command import ending, words_for_fire
from picogpt.errors import LANGUAGES, PicoGPTError, _, speaking

from . import check_all, check_extras, closing_line, load_file, report_lines
from .cases import NOT_WRITTEN
from .generation import PROMPT, check_model_flags, learner_text
from .template import write_template

PROGRAM = "python -m picogpt.exercises"


def new(file: str) -> int:
    """Write FILE: seed 001's ten functions to fill in, each with its docstring. An existing
    file is never replaced.

    Args:
        file: The Python file to write, such as my_gpt.py.
    """
    write_template(file)
    print(_("wrote {file}: fill in its ten functions in order, then run: {program} check "
            "{file}").format(file=file, program=PROGRAM))
    return 0


def check(file: str, lang: str | None = None, prompt: str = PROMPT, model_size: str = "124M",
          models_dir: str = "models", hf: str | None = None) -> int:
    """Check the ten functions in FILE against picogpt's, in seed 001's order; once all pass,
    generate text with them and compare it with picogpt's greedy ids. An extra the file defines
    (cross_attention, docs/couplet.md) is checked after them.

    Args:
        file: The learner's Python file (python -m picogpt.exercises new writes one).
        lang: zh or en; the default follows the locale (LANG=zh_CN.UTF-8 is Chinese).
        prompt: The text the final generation continues.
        model_size: The GPT-2 in models_dir to generate with once all pass; without one on
            disk, random weights of GPT-2's shape are used. Nothing is downloaded.
        models_dir: Folder that holds downloaded models.
        hf: A Hugging Face GPT-2 folder (or a model id in its cache) to generate with instead.
    """
    if lang is not None and lang not in LANGUAGES:
        raise PicoGPTError(_("--lang={lang}: choose zh or en.").format(lang=repr(lang)))
    with speaking(lang) if lang else contextlib.nullcontext():
        check_model_flags(model_size, models_dir, hf)
        module = load_file(file)
        results = check_all(module, file)
        extras = check_extras(module, file, results)  # cross_attention, if the file has it
        print(_("Checking {file} against picogpt, in seed 001's order:").format(file=file))
        print("\n".join(report_lines(results + extras, file)), flush=True)
        extra_failed = any(not r.passed and r.what != NOT_WRITTEN for r in extras)
        print(closing_line(results + extras))
        if not all(r.passed for r in results):
            print(_("Fix the first function that failed and check again; docs/exercises.md "
                    "says how to read a failure."))
            return 1
        same, lines = learner_text(module, file, prompt, model_size, models_dir, hf)
        print("\n".join(lines))
        return 0 if same and not extra_failed else 1


def main(argv: list[str] | None = None) -> None:
    """Run the command line argv (sys.argv's words after the program's name)."""
    argv = sys.argv[1:] if argv is None else argv
    commands = {"new": new, "check": check}
    if argv[:1] in (["--help"], ["-h"]):  # help is asked for, not a mistake
        print(_("{program} new FILE: write the file to fill in; {program} check FILE: check it "
                "(see {program} check --help).").format(program=PROGRAM))
        return
    with ending():
        if not argv or argv[0] not in commands:
            raise PicoGPTError(_("{program} takes a command first: new FILE (write the file "
                                 "to fill in) or check FILE (check it); see {program} check "
                                 "--help.").format(program=PROGRAM))
        function = commands[argv[0]]
        program = f"{PROGRAM} {argv[0]}"
        words = words_for_fire(argv[1:], function, program, "file")
        code = fire.Fire(function, command=words, name=program, serialize=lambda result: None)
    sys.exit(code or 0)


if __name__ == "__main__":
    main()
