"""The programs in scripts/: a benchmark figure is only kept if it measured what it names."""

import re
import shutil
import sys
from pathlib import Path

import pytest

from scripts.benchmarks.common import BenchmarkError, first_output_seconds, run_child
from scripts.benchmarks.speed import first_token_once
from scripts.figures.common import source


def test_first_token_times_are_times_to_a_real_token_for_both_engines(tiny, tmp_path):
    """Each engine's process is started as the benchmark starts it and must print a token: the
    transformers child once unpacked five values into three names and crashed, and the figure
    was the time until its pipe closed."""
    work = tmp_path / "work"
    shutil.copytree(tiny.models_dir, work / "models")
    shutil.copy(tiny.reference, work / "reference.npz")
    assert run_child("scripts.benchmarks.speed", "--child", "save-hf", "transformers", "--work",
                     str(work)) == "saved"
    for engine in ("picogpt", "transformers"):
        assert 0 < first_token_once(engine, work) < 120


def test_a_child_that_fails_is_an_error_not_a_figure():
    with pytest.raises(BenchmarkError, match="wrote nothing to stdout:\nno model here"):
        first_output_seconds([sys.executable, "-c",
                              "import sys; print('no model here', file=sys.stderr); sys.exit(3)"])
    with pytest.raises(BenchmarkError, match=r"failed \(exit 1\)"):
        run_child("scripts.benchmarks.speed", "--child", "load", "picogpt", "--work",
                  "/no/such/folder", "--t0", "0")


def test_a_child_run_from_another_checkout_imports_that_checkouts_picogpt(tmp_path):
    """speed.py --before times another checkout by running its children from there: their
    `picogpt` must be that checkout's, not the one installed in the environment."""
    (tmp_path / "picogpt").mkdir()
    (tmp_path / "picogpt" / "__init__.py").write_text("")
    (tmp_path / "probe.py").write_text("import picogpt\nprint(picogpt.__file__)\n")
    assert run_child("probe", cwd=tmp_path) == str(tmp_path / "picogpt" / "__init__.py")
    assert first_output_seconds([sys.executable, "-m", "probe"], cwd=tmp_path) > 0


def test_every_picture_in_the_docs_exists_and_names_the_program_that_drew_it():
    """A learner who sees a picture can find how it was made: each image a doc shows exists,
    carries in its PNG "Source" text the command that wrote it, that command's program is in
    scripts/figures, and the doc names the program. No picture in docs/ is left unshown."""
    root = Path(__file__).parents[1]
    shown = set()
    for doc in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text):
            picture = (doc.parent / target).resolve()
            where = f"{doc.relative_to(root)} shows {target}"
            assert picture.is_file(), f"{where}, which does not exist"
            command = source(picture)
            assert command and command.startswith("python -m scripts.figures."), \
                f"{where}, whose Source is {command!r}"
            module = command.split()[2]
            assert (root / (module.replace(".", "/") + ".py")).is_file(), f"{where}: {command}"
            assert module in text, f"{where} but never names {module}"
            shown.add(picture)
    assert set((root / "docs").rglob("*.png")) - shown == set()


def test_every_name_a_script_imports_from_picogpt_exists():
    """Benchmarks import inside their functions, in children no test starts: after a name
    moved (reuse_freed_memory from cli.py to command.py), speed.py and sizes.py failed only
    when someone ran them. Every `from picogpt... import name` in scripts/ must resolve."""
    import ast
    import importlib

    root = Path(__file__).parents[1]
    for path in sorted((root / "scripts").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("picogpt"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name) or importlib.util.find_spec(
                        f"{node.module}.{alias.name}"), f"{path.name}: {node.module}.{alias.name}"


def write_marked_poems(root: Path, n_poems: int = 30) -> Path:
    """chinese-poetry's npm layout with strains/: each poem one 联 「X宅凭鱼跃，天高任鸟飞。」 (X a
    level character, so each text differs), marked 平仄平平仄，平平仄仄平。 as the classical
    tones have them: 宅 is oblique there, level (zhái) in Mandarin."""
    import json

    level = "天高飞鱼凭风花山云春秋江溪烟霜钟楼城波声舟林桥泉村门窗帆歌琴梅兰松竹亭台前"
    folder = root / "package" / "dist"
    poems = [{"id": f"p{i}", "author": "某", "title": str(i),
              "paragraphs": [f"{level[i]}宅凭鱼跃，天高任鸟飞。"]} for i in range(n_poems)]
    marks = [{"id": f"p{i}", "strains": ["平仄平平仄，平平仄仄平。"]} for i in range(n_poems)]
    for sub, entries in (("quantangshi", poems), ("strains/json", marks)):
        (folder / sub).mkdir(parents=True)
        (folder / sub / "poet.tang.0.json").write_text(json.dumps(entries, ensure_ascii=False),
                                                       encoding="utf-8")
    return root / "package"


def test_classical_tones_pairs_each_character_with_its_own_mark(tmp_path):
    """On pairs whose marks are known, the Mandarin judge misreads 宅 alone: it agrees on 9 of
    each 联's 10 characters, finds 1 of the 2 even places opposed where the marks find both,
    and both see every 下句 end level."""
    pytest.importorskip("pypinyin", reason="pip install pypinyin (a dependency of picogpt)")
    from scripts.benchmarks.classical_tones import measure, report

    result = measure(str(write_marked_poems(tmp_path)), 10)
    assert result["marked_pairs"] == result["held_out_pairs"] == 10
    chars = result["characters"]
    assert (chars["characters"], chars["agree"], chars["oblique_read_level"]) == (100, 0.9, 0.1)
    assert chars["most_misread_oblique"] == [("宅", 10)] and chars["most_misread_level"] == []
    assert result["every"]["mandarin"] == {"opposition": 0.5, "level_end": 1.0}
    assert result["every"]["classical"] == {"opposition": 1.0, "level_end": 1.0}
    assert "宅 read 平 where the marks say 仄: 10 times" in report(result)


def test_decoder_only_scores_the_xia_ju_and_its_end_given_the_shang_ju(tmp_path):
    """The GPT's held-out loss is -log p of the 下句's characters and its 。 after <start>上句，
    (counted here one line at a time), and the comparison runs end to end on a small corpus: two
    models of near parameter counts, each sample as long as its 上句."""
    import numpy as np

    from picogpt import train
    from picogpt.chars import Chars
    from picogpt.model import gpt2
    from scripts.benchmarks.decoder_only import compare, gpt_held_out, lines_of, table

    encoder = Chars([*"天高任鸟飞海阔凭鱼跃，。", "<|unknown|>", "<|start|>"])
    hparams = {"n_vocab": encoder.n_vocab, "n_ctx": 16, "n_embd": 16, "n_head": 2, "n_layer": 1}
    params = train.init_params(hparams, np.random.default_rng(0))
    rows = [("海阔凭鱼跃", "天高任鸟飞", True), ("天高任鸟飞", "海阔凭鱼跃", False)]
    expected = []
    for first, second, _middle in rows:
        ids = [encoder.start, *encoder.encode(f"{first}，{second}。")]
        log_p = gpt2(np.array(ids[:-1]), **params, n_head=2).astype(np.float64)
        log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
        expected.append([-log_p[i - 1, ids[i]] for i in range(7, 13)])  # 下句 and 。
    got = gpt_held_out(params, lines_of(rows, encoder), 2)
    assert got["held_out"] == pytest.approx(np.mean(expected), abs=1e-4)
    assert got["held_out_middle"] == pytest.approx(np.mean(expected[0]), abs=1e-4)

    result = compare(str(write_marked_poems(tmp_path)), 0.5, 10, n_samples=3)
    seq, gpt = result["encoder-decoder"], result["decoder-only"]
    assert abs(gpt["params"] - seq["params"]) / seq["params"] < 0.1
    # both as long as the 上句; the GPT's mask also keeps out the marks its vocabulary holds (the
    # encoder-decoder's answer masks only the length: how far 0.5 s of CPU trains it, and so
    # whether it writes a mark, depends on the machine)
    for sample in result["samples"]:
        for model in ("encoder-decoder", "decoder-only"):
            assert len(sample[model]) == len(sample["上句"])
        assert not set(sample["decoder-only"]) & set("，。")
    assert table(result)[2].startswith("| encoder-decoder | ")


def test_a_row_with_another_rows_step_takes_its_time_untimed(tmp_path):
    """why_llama.py: wsd and zero-proj run the LLaMA row's products, so they take its idle step
    time rather than a timing in turns whose noise would give the same step fewer steps."""
    import json
    from types import SimpleNamespace

    from scripts.benchmarks import why_llama

    (tmp_path / "step_seconds.json").write_text(json.dumps({"llama": {"seconds": 0.1134}}))
    args = SimpleNamespace(relative_to="llama", text=str(tmp_path / "no poems here"))
    times = why_llama.calibrated(["wsd", "zero-proj"], args, tmp_path, again=True)
    assert times["wsd"]["seconds"] == times["zero-proj"]["seconds"] == 0.1134
