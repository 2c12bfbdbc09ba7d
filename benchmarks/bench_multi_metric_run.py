"""One joint ``run --adaptive`` over two metrics against two single-bank runs, to the same SE target.

For each held-out WMT24 en-de system (default: Mistral-Large, GPT-4, Aya23) the shipped BLEU and chrF
banks are rebuilt WITHOUT that system (benchmarks/build_banks.py, as tests/test_shipped_banks.py
does), and the system's recorded scores answer the tests, with the settings of ``run --adaptive``
(``--se-target 0.2 --min-items 30 --max-items 500``; the engine classes the harness drives):

* joint: one :class:`MultiMetricTest` with both banks: each item generated once, scored by both
  metrics, stopping when both metrics' SE meet the target;
* separate: two :class:`AdaptiveTest` runs, one per bank, each to the same target.

Prints per system, mean over the seeds: generations (joint; separate: the two runs' sum and their
distinct documents, what a cache shared between the runs would pay), each metric's final SE,
95% interval width of the full-task estimate, and whether the interval holds the system's true
mean (its recorded score averaged over every document).

    python benchmarks/bench_multi_metric_run.py [--systems Mistral-Large GPT-4 Aya23] [--seeds 20]
        [--se-target 0.2] [--json docs/results/multi_metric_run.json]

``--harness``: the same comparison through the real command instead (one run per system; the
harness, litellm and HTTP to the replay endpoint over ../shared/data): ``lm-eval-adaptive run
--adaptive --bank BLEU CHRF`` against ``--bank BLEU`` and ``--bank CHRF``, with the banks built
without the system; generations are counted at the replay endpoint.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lm_eval_adaptive.data.named_tables import load_named  # noqa: E402
from lm_eval_adaptive.engine.cat.adaptive_test import AdaptiveTest  # noqa: E402
from lm_eval_adaptive.engine.cat.full_task import full_task_estimate  # noqa: E402
from lm_eval_adaptive.engine.cat.multi_metric_test import MultiMetricTest  # noqa: E402

METRICS = ("bleu", "chrf")


def _build_banks():
    spec = importlib.util.spec_from_file_location("build_banks", REPO / "benchmarks" / "build_banks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def recorded(system: str) -> dict:
    """Metric → {item id: the system's raw score}."""
    out = {}
    for m in METRICS:
        t = load_named(f"wmt24/en-de/{m}")
        row = t.mean_matrix()[list(t.models).index(system)]
        out[m] = {str(i): float(v) for i, v in zip(t.items, row) if np.isfinite(v)}
    return out


def interval(bank, e, raw_of) -> dict:
    raw = np.array([raw_of[str(bank.item_ids[i])] for i in e.items])
    return full_task_estimate(bank, e.items, raw, e.theta, e.se, misfit=e.misfit)


def run_system(system: str, seeds: int, se_target: float, min_items: int, max_items: int) -> dict:
    bb = _build_banks()
    banks = {m: bb.build_bank(f"wmt24_en-de.{m}", exclude=[system]) for m in METRICS}
    raw = recorded(system)
    truth = {m: float(np.mean(list(raw[m].values()))) for m in METRICS}
    rows = []
    for seed in range(seeds):
        joint = MultiMetricTest(banks, se_target=se_target, min_items=min_items, max_items=max_items, seed=seed,
                                name=system)
        while items := joint.next_items(1):
            for i in items:
                iid = joint.item_ids[i]
                joint.record(i, {m: (float(banks[m].scale(joint.bank_item(m, i), raw[m][iid])) if iid in raw[m]
                                     else None) for m in METRICS})
        r = {"seed": seed, "joint_generations": joint.n, "joint_stop": joint.stopped_because, "metrics": {}}
        separate_docs = set()
        r["separate_generations"] = 0
        for m in METRICS:
            bank = banks[m]
            est_j = interval(bank, joint.examinees[m], raw[m])
            test = AdaptiveTest(bank, se_target=se_target, min_items=min_items, max_items=max_items, seed=seed,
                                name=system)
            test.exclude([k for k, iid in enumerate(bank.item_ids) if str(iid) not in raw[m]])
            res = test.run(lambda k: float(bank.scale(k, raw[m][str(bank.item_ids[k])])))
            est_s = interval(bank, test.examinee, raw[m])
            r["separate_generations"] += res.n_items
            separate_docs |= {str(bank.item_ids[k]) for k in res.items}
            r["metrics"][m] = {
                "joint": {"se": joint.examinees[m].se, "width": est_j["upper"] - est_j["lower"],
                          "covers": bool(est_j["lower"] <= truth[m] <= est_j["upper"])},
                "separate": {"items": res.n_items, "se": res.se, "width": est_s["upper"] - est_s["lower"],
                             "covers": bool(est_s["lower"] <= truth[m] <= est_s["upper"]),
                             "stop": res.stopped_because}}
        r["separate_distinct"] = len(separate_docs)
        rows.append(r)

    def mean(f):
        return float(np.mean([f(r) for r in rows]))

    summary = {"system": system, "truth": truth, "seeds": seeds,
               "joint_generations": mean(lambda r: r["joint_generations"]),
               "separate_generations": mean(lambda r: r["separate_generations"]),
               "separate_distinct": mean(lambda r: r["separate_distinct"]),
               "joint_stops": sorted({r["joint_stop"] for r in rows}), "metrics": {}}
    for m in METRICS:
        summary["metrics"][m] = {mode: {k: mean(lambda r: r["metrics"][m][mode][k]) for k in
                                        (("items", "se", "width", "covers") if mode == "separate" else
                                         ("se", "width", "covers"))} for mode in ("joint", "separate")}
    summary["runs"] = rows
    return summary


def harness_system(system: str, se_target: float, min_items: int, max_items: int, tmp: Path) -> dict:
    """One joint and two single-bank ``run --adaptive`` of ``system`` through the replay endpoint."""
    import glob

    from lm_eval_adaptive.cli.main import main as cli
    from lm_eval_adaptive.replay.server import ReplayServer

    bb = _build_banks()
    paths = {m: bb.write_bank(bb.build_bank(f"wmt24_en-de.{m}", exclude=[system]), tmp / system / f"{m}.json.gz")
             for m in METRICS}
    raw = recorded(system)
    truth = {m: float(np.mean(list(raw[m].values()))) for m in METRICS}
    out = {"system": system, "truth": truth}
    with ReplayServer() as srv:
        os.environ["OPENAI_API_BASE"], os.environ["OPENAI_API_KEY"] = srv.url, "replay"
        for mode, banks in (("joint", list(METRICS)), *((m, [m]) for m in METRICS)):
            srv.reset_stats()
            dest = tmp / system / mode
            rc = cli(["run", "--model", "litellm", "--model_args", f"model=openai/{system}", "--tasks", "wmt24_en-de",
                      "--include_path", str(REPO / "task_configs"), "--apply_chat_template", "--no-progress",
                      "--output_path", str(dest), "--adaptive", "--bank", *(str(paths[m]) for m in banks),
                      "--se-target", str(se_target), "--min-items", str(min_items), "--max-items", str(max_items)])
            assert rc == 0, (system, mode, rc)
            (res,) = glob.glob(str(dest / "*" / "results_*.json"))
            a = json.loads(Path(res).read_text())["adaptive"]["wmt24_en-de"]
            blocks = a["metrics"] if "metrics" in a else {a["metric"]: a}
            out[mode] = {"generated": srv.stats()["served"], "stopped_because": a["stopped_because"],
                         "metrics": {m: {"items": b["items"], "se": b["se"], **b["metric_estimate"],
                                         "covers": b["metric_estimate"]["lower"] <= truth[m]
                                         <= b["metric_estimate"]["upper"]} for m, b in blocks.items()}}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", nargs="+", default=["Mistral-Large", "GPT-4", "Aya23"])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--se-target", type=float, default=0.2)
    ap.add_argument("--min-items", type=int, default=30)
    ap.add_argument("--max-items", type=int, default=500)
    ap.add_argument("--json", default=None)
    ap.add_argument("--harness", action="store_true", help="through the real command and the replay endpoint")
    a = ap.parse_args(argv)
    out = []
    if a.harness:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            for s in a.systems:
                r = harness_system(s, a.se_target, a.min_items, a.max_items, Path(tmp))
                out.append(r)
                sep = r["bleu"]["generated"] + r["chrf"]["generated"]
                per = "  ".join(
                    f"{m}: joint {x['estimate']:.4f} [{x['lower']:.4f}, {x['upper']:.4f}] / separate "
                    f"{r[m]['metrics'][m]['estimate']:.4f} [{r[m]['metrics'][m]['lower']:.4f}, "
                    f"{r[m]['metrics'][m]['upper']:.4f}] / true {r['truth'][m]:.4f}"
                    for m, x in r["joint"]["metrics"].items())
                print(f"{s:<15} generated: joint {r['joint']['generated']}, separate {r['bleu']['generated']} + "
                      f"{r['chrf']['generated']} = {sep};  {per}", flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps({"settings": vars(a), "systems": out}, indent=1) + "\n")
        return 0
    print(f"{'system':<15}{'joint gen':>10}{'sep gen':>9}{'sep dist':>9}   per metric: joint SE / width / cover"
          "  |  separate items / SE / width / cover")
    for s in a.systems:
        r = run_system(s, a.seeds, a.se_target, a.min_items, a.max_items)
        out.append(r)
        per = "  ".join(
            f"{m}: {x['joint']['se']:.3f}/{x['joint']['width']:.4f}/{x['joint']['covers']:.2f} | "
            f"{x['separate']['items']:.1f}/{x['separate']['se']:.3f}/{x['separate']['width']:.4f}/"
            f"{x['separate']['covers']:.2f}" for m, x in r["metrics"].items())
        print(f"{s:<15}{r['joint_generations']:>10.1f}{r['separate_generations']:>9.1f}"
              f"{r['separate_distinct']:>9.1f}   {per}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"settings": vars(a), "systems": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
