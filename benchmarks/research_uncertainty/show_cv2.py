import sys, pandas as pd, numpy as np, analyze as A
pd.set_option('display.width',250); pd.set_option('display.max_columns',40); pd.set_option('display.max_rows',200)
lab, which = sys.argv[1], sys.argv[2]
o=pd.read_parquet(f'results/cv_{lab}_{which}_outer.parquet'); p=pd.read_parquet(f'results/cv_{lab}_{which}_pred.parquet')
def cov(g,f): return ((g[f+'_lo']<=g.T_true)&(g.T_true<=g[f+'_hi']))
def s(g):
    r={'n':len(g),'z':(g.z.abs()>1.96).mean(),'z_cv':(g.z_cv.abs()>1.96).mean(),'z_pf':(g.z_pf.abs()>1.96).mean()}
    for f in ['ft_engine','ft_model','ft_model_cv','ft_model_pf','ft_design']:
        if f+'_lo' in g and g[f+'_lo'].notna().any():
            gg=g[g[f+'_lo'].notna()]; r[f]=cov(gg,f).mean(); r[f+'_w']=(gg[f+'_hi']-gg[f+'_lo']).mean()
    return pd.Series(r)
print(o.groupby('variant').apply(s).round(3).to_string())
print(o.groupby(['family','variant']).apply(s).round(3).to_string())
for f in ['ft_model_cv','ft_model_pf','ft_engine','ft_design']:
    if f+'_lo' in o: print('min table', f, A.min_table_cov(o, f))
print('flag share', (o[o.variant=="plain"].pf_class=="misfit").mean())
m = o.groupby(['table','variant']).apply(lambda g: pd.Series({'zcv_meas':(g.z_cv.abs()>1.96).mean(),'zpf_meas':(g.z_pf.abs()>1.96).mean(),
     'ftcv_meas':cov(g,'ft_model_cv').mean(),'ftpf_meas':cov(g,'ft_model_pf').mean()}))
pr = p.groupby(['table','variant'])[['z_share_cv','z_share_pf','ft_model_cv','ft_model_pf']].mean()
j=m.join(pr)
print('self-check pooled (predicted vs measured):'); print(j.groupby('variant').mean().round(3).to_string())
fam = j.reset_index(); fam['family']=fam.table.map(lambda t: o[o.table==t].family.iloc[0])
print(fam.groupby(['family','variant'])[['ftpf_meas','ft_model_pf','zpf_meas','z_share_pf']].mean().round(3).to_string())
j['d_ftpf']=(j.ft_model_pf-j.ftpf_meas).abs(); j['d_zpf']=(j.z_share_pf-j.zpf_meas).abs()
print(j.groupby('variant')[['d_ftpf','d_zpf']].agg(['mean','max']).round(3))
