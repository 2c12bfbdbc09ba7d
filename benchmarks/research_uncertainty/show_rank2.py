"""Ranker summary under three ground truths: bootstrap-CI overlap (backtest), paired bootstrap, margin δ."""
import sys, pandas as pd, numpy as np, analyze as A
pd.set_option('display.width',250); pd.set_option('display.max_columns',40); pd.set_option('display.max_rows',200)
args=[a for a in sys.argv[1:] if not a.startswith('--')]
fam = '--fam' in sys.argv
r=pd.concat([pd.read_parquet(f'results/{f}.parquet') for f in args])
def summ(g, margin):
    g = A.pair_flags(g)
    out = {}
    runs = g.drop_duplicates(['table','fold','seed'])
    nc = g.confident.sum(); out['conf_acc']=g.correct.sum()/nc; out['conf_pairs']=nc
    pt = g.groupby('table').agg(nc=('confident','sum'), ok=('correct','sum')); pt=pt[pt.nc>=10]
    out['worst_acc']=(pt.ok/pt.nc).min()
    for lab, tt in [('boot', g.truth_tie), ('pair', g.truth_tie_paired), ('m', g.true_diff.abs() < margin*g.R)]:
        out[f'rec_{lab}'] = (g.rep_tie & tt).sum()/tt.sum()
        out[f'prec_{lab}'] = (g.rep_tie & tt).sum()/max(g.rep_tie.sum(),1)
    out['truth_m_share'] = (g.true_diff.abs() < margin*g.R).mean()
    out['rep_tie']=g.rep_tie.mean(); out['settled_tie']=g.settled_tie.mean()
    out['tau']=runs.tau.mean(); out['rand_tau']=runs.random_tau.mean(); out['items']=runs['items'].mean()
    return pd.Series(out)
margin = float([a for a in sys.argv if a.startswith('--margin=')][0].split('=')[1]) if any(a.startswith('--margin=') for a in sys.argv) else 0.02
by = ['family','config'] if fam else ['config']
print(f'margin GT: |true diff| < {margin} x scale range')
print(r.groupby(by).apply(lambda g: summ(g, margin)).round(3).to_string())
