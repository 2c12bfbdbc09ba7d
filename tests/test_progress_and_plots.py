"""Progress displays and plots: `backtest --plot`, `run --adaptive --plot` (through the replay endpoint),
`leaderboard render --plot`; progress on stderr leaves stdout as it is; the harness's per-request
bars are off during an adaptive run."""

from __future__ import annotations

import glob
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.cells import cell_len
from rich.console import Console

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.cli.progress import AdaptiveRunProgress, BacktestProgress
from lm_eval_adaptive.cli.run import plot_beside
from lm_eval_adaptive.harness.task_loop import TaskProgress

REPO = Path(__file__).resolve().parents[1]


def _real_data():
    from lm_eval_adaptive.data.data_root import data_root
    from lm_eval_adaptive.errors import InputError

    try:
        data_root()
    except InputError as e:
        pytest.skip(f"real data not available: {e}")


def assert_png(path, *, min_size=(300, 400)):
    """A readable PNG of at least ``min_size`` (height, width) pixels that is not one flat colour."""
    import matplotlib.image as mpimg

    img = mpimg.imread(str(path))
    assert img.ndim == 3 and img.shape[0] >= min_size[0] and img.shape[1] >= min_size[1], img.shape
    rgb = img[..., :3]
    assert float(rgb.std()) > 0.02  # not blank
    assert np.any(rgb.min(axis=-1) < 0.5)  # something dark was drawn (text, markers)
    return img


def _normalised(table_text: str) -> str:
    """A printed backtest without what differs between two runs of it: the seconds column and the
    widths it sets (a run of rules or spaces, and the padding that centres a title over the table)."""
    out = []
    for line in table_text.splitlines():
        line = re.sub(r"│ *[\d.]+ *│$", "│ S │", line)
        out.append(re.sub(r"([━─ ])\1+", r"\1", line).strip())
    return "\n".join(out)


# ------------------------------------------------------------------------------ backtest
def test_backtest_plot_and_progress_on_a_pipe(tmp_path, capsys, monkeypatch):
    _real_data()
    monkeypatch.delenv("COLUMNS", raising=False)  # the default width of output that is not a terminal
    png, js = tmp_path / "bt.png", tmp_path / "bt.json"
    args = ["backtest", "wmt24/en-de/bleu", "--seeds", "2", "--folds", "2", "--bootstrap", "500"]
    # piped: stdout holds the tables, stderr a plain line per fold (no bar, no escape codes)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    piped = subprocess.run([sys.executable, "-m", "lm_eval_adaptive.cli", *args], capture_output=True, text=True,
                           env=env, timeout=300, check=False)
    assert piped.returncode == 0, piped.stderr
    err_lines = [x for x in piped.stderr.splitlines() if x.startswith("backtest ")]
    assert err_lines == [f"backtest 1/1 wmt24/en-de/bleu: fold {f} of 2 done ({2 * f}/4 runs, "
                         + err_lines[f - 1].rsplit(", ", 1)[1] for f in (1, 2)], piped.stderr
    assert "\r" not in piped.stderr and "\x1b" not in piped.stderr
    assert "done (" not in piped.stdout and "\x1b" not in piped.stdout
    # piped: no line wider than 120 columns (it was about 220), the table's name whole in every part
    assert max(cell_len(x) for x in piped.stdout.splitlines()) <= 120
    assert sum("│ wmt24/en-de/bleu " in x for x in piped.stdout.splitlines()) >= 2
    # the same backtest without progress, with --plot and --json: the same tables on stdout
    assert main([*args, "--no-progress", "--plot", str(png), "--json", str(js)]) == 0
    out, err = capsys.readouterr()
    assert "done (" not in err
    assert _normalised(out.replace(f"wrote {js}\n", "").replace(f"wrote {png}\n", "")) == _normalised(piped.stdout)
    assert f"wrote {png}" in out
    assert_png(png)
    r = json.loads(js.read_text())
    assert {"adaptive", "random", "shared_random", "fixed", "fixed_matched"} <= set(r)


def test_backtest_progress_counts_tables_folds_and_seeds():
    buf = io.StringIO()
    console = Console(file=buf, width=200)  # not a terminal: plain lines
    with BacktestProgress(console, 2, folds=3, seeds=2) as prog:
        first = prog.table(0, "a")
        for done in range(1, 7):
            first(done, 6)
        second = prog.table(1, "b/c")  # a small table: only 2 of the 3 folds fit
        for done in range(1, 5):
            second(done, 4)
    lines = buf.getvalue().splitlines()
    assert [x.split(" (")[0] for x in lines] == [
        "backtest 1/2 a: fold 1 of 3 done", "backtest 1/2 a: fold 2 of 3 done", "backtest 1/2 a: fold 3 of 3 done",
        "backtest 2/2 b/c: fold 1 of 2 done", "backtest 2/2 b/c: fold 2 of 2 done"]
    assert "(10/10 runs" in lines[-1]
    quiet = io.StringIO()
    with BacktestProgress(Console(file=quiet), 1, folds=1, seeds=1, enabled=False) as prog:
        prog.table(0, "a")(1, 1)
    assert quiet.getvalue() == ""


# -------------------------------------------------------------------------- run --adaptive
def _step(items, stopped=None, max_items=20):
    return TaskProgress(task="t", metric="bleu", items=items, max_items=max_items, task_docs=997, theta=0.1 * items,
                        se=1 / (1 + items), estimate=0.3, lower=0.2, upper=0.4, spent=0.01 * items, budget=1.0,
                        stopped_because=stopped)


def test_adaptive_run_progress_lines_on_a_pipe():
    buf = io.StringIO()
    with AdaptiveRunProgress(Console(file=buf, width=300)) as display:
        for n in range(0, 21, 1):
            display.update(_step(n))
        display.update(_step(20, "max_items"))
        display.update(_step(20, "max_items"))
    lines = buf.getvalue().splitlines()
    # the start, each tenth of the most documents, the stop once
    assert [x.split(";")[0] for x in lines] == ["t: 0/20 documents"] + [f"t: {n}/20 documents" for n in
                                                                        range(2, 21, 2)] + ["t: 20/20 documents"]
    assert lines[0].endswith("no document yet; $0.0000 of $1")
    assert "θ̂ +2.00 ± 0.05; bleu ≈ 0.3000 [0.2000, 0.4000]; $0.2000 of $1; stopped: max_items" in lines[-1]


def test_a_bank_free_run_shows_the_mean_and_documents_answered_not_theta():
    """A task with no bank (issue 31): no θ̂ ± SE and no count to --max-items as if a bank ran; the mean with its
    interval (and width) and the documents answered of the task's."""
    buf = io.StringIO()
    with AdaptiveRunProgress(Console(file=buf, width=300)) as display:
        for n, stop in ((0, None), (5, None), (67, "ci_width")):
            display.update(TaskProgress(task="t", metric="chrf", items=n, max_items=500, task_docs=997,
                                        theta=float("nan"), se=float("nan"), estimate=0.61, lower=0.58, upper=0.64,
                                        spent=0.001 * n, budget=None, stopped_because=stop, mode="bank-free"))
    lines = buf.getvalue().splitlines()
    assert lines[-1].startswith("t: 67 of 997 documents answered (random order, bank-free); chrf = 0.6100 "
                                "[0.5800, 0.6400] (width 0.0600")
    assert lines[-1].endswith("stopped: ci_width")
    assert not any("θ̂" in x or "/500" in x for x in lines)


def test_the_plot_of_a_run_goes_beside_its_results():
    f = Path("out/openai__GPT-4/results_2025-01-01T00-00-00.json")
    assert plot_beside(f) == Path("out/openai__GPT-4/adaptive_2025-01-01T00-00-00.png")
    assert plot_beside(Path("out/mine_2025.json")) == Path("out/mine_2025.png")
    assert plot_beside(None) is None


def test_harness_bars_are_off_only_inside_the_context():
    from lm_eval.api import model as lm_model
    from lm_eval.models import api_models

    from lm_eval_adaptive.harness.lm_eval_compat import harness_bars_off

    def drawn(cls):
        buf = io.StringIO()
        # disable=False: a rank or refresh run earlier in this process set TQDM_DISABLE (live/session.py),
        # which tqdm may have read into its defaults; the context must turn even such a bar off
        bar = cls(desc="Requesting API", total=2, file=buf, mininterval=0, disable=False)
        bar.update(2)
        bar.close()
        return buf.getvalue()

    assert "Requesting API" in drawn(api_models.tqdm)
    with harness_bars_off():
        assert drawn(api_models.tqdm) == "" and drawn(lm_model.tqdm) == ""
        assert drawn(api_models.tqdm_asyncio) == ""
    assert "Requesting API" in drawn(api_models.tqdm)


def test_adaptive_run_shows_progress_instead_of_the_harness_bars_and_plots(replay_server, tmp_path, capsys):
    from lm_eval_adaptive.engine.irt.bank import ItemBank
    from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel

    ids = [str(i) for i in range(100, 160)]
    bank = tmp_path / "bank.json"
    ItemBank(item_ids=np.array(ids, dtype=object), b=np.random.default_rng(0).normal(0, 1, len(ids)),
             model=ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=1.0, input_tokens=100.0,
             output_tokens=100.0, task="wmt24_en-de", metric="bleu").save(bank)
    out = tmp_path / "out"
    assert main(["run", "--model", "litellm", "--model_args", "model=openai/GPT-4,num_concurrent=8",
                 "--tasks", "wmt24_en-de", "--include_path", str(REPO / "task_configs"), "--apply_chat_template",
                 "--output_path", str(out), "--adaptive", "--bank", str(bank), "--item-field", "doc_id",
                 "--min-items", "10", "--max-items", "10", "--batch-size-adaptive", "2"]) == 0
    stdout, stderr = capsys.readouterr()
    assert "Requesting API" not in stderr and "Checking cached requests" not in stderr
    steps = [x for x in stderr.splitlines() if x.startswith("wmt24_en-de: ") and "documents;" in x]
    assert steps[0].startswith("wmt24_en-de: 0/10 documents; no document yet")
    assert steps[-1].startswith("wmt24_en-de: 10/10 documents; θ̂ ") and steps[-1].endswith("stopped: max_items")
    assert "estimated full-task bleu" in stdout  # the results, on stdout as before
    (res,) = glob.glob(str(out / "openai__GPT-4" / "results_*.json"))
    a = json.loads(Path(res).read_text())["adaptive"]["wmt24_en-de"]
    tr = a["trajectory"]
    assert len(tr["theta"]) == len(tr["se"]) == a["items"] == 10
    assert tr["theta"][-1] == pytest.approx(a["theta"]) and tr["se"][-1] == pytest.approx(a["se"])
    assert all(s > 0 for s in tr["se"])
    png = plot_beside(Path(res))
    assert f"wrote {png}" in stderr
    assert_png(png, min_size=(250, 600))


# ------------------------------------------------------------------------------ leaderboard
def test_leaderboard_render_plot(tmp_path, capsys):
    _real_data()
    lb, png = tmp_path / "board.json", tmp_path / "board.png"
    models = ["GPT-4", "Claude-3.5", "Aya23", "Phi-3-Medium", "ONLINE-B", "CUNI-NL", "IKUN-C", "Mistral-Large"]
    assert main(["leaderboard", "--history", "wmt24/en-de/bleu", "--task", "wmt24_en-de", "--metric", "bleu",
                 "--item-field", "id", "--models", *models, "--out", str(lb)]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "render", str(lb), "--plot", str(png)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {png}"
    assert not list(tmp_path.glob("*.html"))
    assert_png(png)
    assert main(["leaderboard", "render", str(lb)]) == 2
    assert "--html FILE" in capsys.readouterr().err


def test_plot_and_progress_flags_stay_out_of_the_run_settings():
    import argparse

    from lm_eval_adaptive.cli.run import split_run_arguments
    from lm_eval_adaptive.errors import InputError

    def ns(**kw):
        base = {"tasks": "t", "adaptive": True, "adaptive_plot": "x.png", "adaptive_no_progress": True,
                "adaptive_dry_run": False}
        return argparse.Namespace(**(base | kw))

    with pytest.raises(InputError, match="add --adaptive"):
        split_run_arguments(ns(adaptive=False))
    with pytest.raises(InputError, match="--dry-run makes none"):
        split_run_arguments(ns(adaptive_dry_run=True))
    harness, config = split_run_arguments(ns())
    assert vars(harness) == {"tasks": "t"} and not config.dry_run


def test_the_backtest_plot_keeps_tau_bars_in_range_and_says_random_matches_dollars():
    """Issue 23 item 8: τ ± SD bars ran past 1.0, and "random (same $)" at 66 items beside adaptive at
    107 read as unequal spend."""
    from types import SimpleNamespace

    from lm_eval_adaptive.cli.report import EQUAL_SPEND_NOTE, backtest_figure
    from lm_eval_adaptive.engine.evaluation.backtest import MethodSummary

    methods = {"adaptive": MethodSummary(0.95, 0.2, 107, 2.0, 0.1), "random": MethodSummary(-0.9, 0.3, 66, 1.2, 0.1),
               "shared_random": MethodSummary(0.7, 0.3, 66, 1.2, 0.1),
               "fixed": MethodSummary(0.8, float("nan"), 120, 2.4, 0.12)}
    r = SimpleNamespace(table="wmt24/en-de/bleu", method=methods.__getitem__,
                        settings={"holdout_size": 4, "folds": 5, "seeds": 2, "confidence": 0.95, "target_items": 20})
    fig = backtest_figure([r])
    ax_tau = fig.axes[0]
    lo, hi = ax_tau.get_xlim()
    assert -1.03 <= lo and hi <= 1.03  # the scale, and room for a cap at 1
    for line in ax_tau.lines:  # the error bars' segments, drawn as lines of the errorbar containers
        x = line.get_xdata()
        assert min(x) >= -1.0 and max(x) <= 1.0
    for coll in ax_tau.collections:
        for seg in coll.get_segments():
            assert seg[:, 0].min() >= -1.0 - 1e-12 and seg[:, 0].max() <= 1.0 + 1e-12
    assert any(t.get_text() == EQUAL_SPEND_NOTE for t in fig.texts)
    import matplotlib.pyplot as plt

    plt.close(fig)
