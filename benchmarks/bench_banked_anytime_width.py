"""Width of the banked ranker's anytime-valid intervals with and without the bank as control variate, on real
dev tables (docs/cold-start.md, *The banked ranker: anytime-valid intervals, decided by measurement*).

Fold 0 of the backtest's partition, seed 0: the fold's bank (with its self-check), the default selector, every
model given at most N items; the same run with both settings (no pair settles at these sizes, so the runs agree),
and at the stop the mean width of a model's and of a pair's interval as a share of the table's score range.

    python benchmarks/bench_banked_anytime_width.py N TABLE [TABLE ...]
"""
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import functools  # noqa: E402

import numpy as np  # noqa: E402
from lm_eval_adaptive.data.tables import load_any_table
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from lm_eval_adaptive.engine.evaluation.backtest import fold_bank, plan_backtest
from lm_eval_adaptive.engine.evaluation.fold_parts import table_positions
from lm_eval_adaptive.engine.evaluation.simulation import drive
from lm_eval_adaptive.engine.anytime.banked_intervals import BankedAnytimeIntervals
from lm_eval_adaptive.engine.ranking.pairs.metric_judgement import MetricScaleJudgement
from lm_eval_adaptive.engine.ranking.ranker import AdaptiveRanker
from lm_eval_adaptive.engine.cat.selection import RandomShareSelector
out=[]
for name in sys.argv[2:]:
    t=load_any_table(name); cfg=BacktestConfig(seeds=1, settle_seeds=0)
    plan=plan_backtest(t,cfg); hold=list(plan.sets[0]); models=list(plan.models)
    bank=fold_bank(t,cfg,[m for m in models if m not in hold])
    raw_all=t.mean_matrix(); tpos=table_positions(t,bank)
    raw=raw_all[[models.index(m) for m in hold]][:, tpos]
    sc=bank.scale(np.arange(bank.n_items)[None,:], raw)
    rng=(float(np.nanmin(raw_all)), float(np.nanmax(raw_all)))
    row={m:j for j,m in enumerate(hold)}
    w={}
    for cv in (True, False):
        parts=[]
        def fac(*a, cv=cv):
            parts.append(BankedAnytimeIntervals.factory(rng, control_variate=cv)(*a)); return parts[-1]
        sel=RandomShareSelector(bank.b, 1, seed=[42,0,0], information=bank.selection_information)
        r=AdaptiveRanker(bank, hold, seed=0, selector=sel, n_max=int(sys.argv[1]), judgement=functools.partial(MetricScaleJudgement, intervals=fac),
                         exclude={m: np.flatnonzero(np.isnan(raw[j])) for j,m in enumerate(hold)})
        drive(r, lambda m,i: float(sc[row[m],i]), raw=lambda m,i: float(raw[row[m],i]))
        r.result(); iv=parts[0]; span=rng[1]-rng[0]
        w[cv]=(np.mean([np.subtract(*iv.model_interval(k)[::-1]) for k in range(4)])/span,
               np.mean([np.subtract(*iv.pair_interval(i,j)[::-1]) for i in range(4) for j in range(i+1,4)])/span)
    out.append((name, w[True], w[False]))
    print(name, "model width/range cv %.3f plain %.3f | pair cv %.3f plain %.3f" % (w[True][0], w[False][0], w[True][1], w[False][1]), flush=True)
a=np.array([[x[1][0],x[2][0],x[1][1],x[2][1]] for x in out])
print("mean", a.mean(0).round(3))
