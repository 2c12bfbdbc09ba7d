"""How much can steering the bank-free ranker's documents buy at all? A model-based ceiling (issue 31).

    python benchmarks/bench_bank_free_ceiling.py tuning|report

For each hold-out set of the backtest's 5 folds (4 models), each pair's true gap over the spread of its
paired differences, z = |mean(d)| / sd(d) over the whole table. With n common documents the chance the
pair's paired mean puts it in the wrong order is about Φ(−z·√n / √(1 − n/N)) (normal approximation with
the finite-population correction; 0 once n = N), so the expected Kendall τ of a set is
1 − 2·Σ_pairs Φ(...)/6. In the shared order a pair's common documents are min(n_a, n_b), n_m the
documents of model m. For 20, 50, 100 and 200 items per model (80..800 per set) it prints the expected τ
of equal allocation (shared random documents) and of the best allocation of the same items (every split
of 80 grid units over the 4 models, searched exhaustively, with the true gaps known: an oracle no ranker
has), pooled over the sets.
"""
import itertools
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from scipy.stats import norm
from lm_eval_adaptive.data.tables import load_any_table
from lm_eval_adaptive.data.prices import uniform_prices
from lm_eval_adaptive.engine.evaluation.backtest import plan_backtest
from lm_eval_adaptive.engine.evaluation.backtest_config import BacktestConfig
from bench_honesty import TUNING, REPORT
half = TUNING if sys.argv[1] == "tuning" else REPORT
U = 80  # grid units per set
pairs=[(i,j) for i in range(4) for j in range(i+1,4)]
g=np.array([c for c in itertools.product(range(1,U),repeat=3) if sum(c)<U])
g=np.column_stack([g,U-g.sum(1)])
folds=[]
for name in half:
    t=load_any_table(name); plan=plan_backtest(t,BacktestConfig(seeds=1),uniform_prices(t.models))
    raw=t.mean_matrix(); models=list(plan.models)
    for f in range(plan.n_folds):
        rh=raw[[models.index(m) for m in plan.sets[f]]]
        folds.append([(abs(np.nanmean(rh[i]-rh[j]))/np.nanstd(rh[i]-rh[j]), int(np.sum(~np.isnan(rh[i]-rh[j])))) for i,j in pairs])
for per_model in (20, 50, 100, 200):
    B = 4*per_model; scale = B/U
    eq=[];opt=[]
    for zs in folds:
        L=np.zeros(len(g))
        for k,(i,j) in enumerate(pairs):
            z,N=zs[k]; n=np.minimum(g[:,i],g[:,j])*scale
            fpc=np.sqrt(np.clip(1-n/N,1e-9,1))
            L+=np.where(n>=N,0.0,norm.cdf(-z*np.sqrt(n)/fpc))
        eq.append(L[np.all(g==U//4,axis=1)][0]); opt.append(L.min())
    print(f"{per_model:4d} items/model: equal tau {1-2*np.mean(eq)/6:.3f}, best allocation (oracle) {1-2*np.mean(opt)/6:.3f}")
