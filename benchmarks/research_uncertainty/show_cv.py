import sys, pandas as pd, numpy as np, analyze as A
pd.set_option('display.width',250); pd.set_option('display.max_columns',40); pd.set_option('display.max_rows',200)
lab, which = sys.argv[1], sys.argv[2]
o=pd.read_parquet(f'results/cv_{lab}_{which}_outer.parquet'); p=pd.read_parquet(f'results/cv_{lab}_{which}_pred.parquet')
print(A.cat_summary(o, by=('variant',), ft=('ft_engine','ft_model','ft_model_cv','ft_design')).round(3).to_string())
print(o.groupby('variant').apply(lambda g: pd.Series({'z_cv_share':(g.z_cv.abs()>1.96).mean(),'rms_zcv':np.sqrt((g.z_cv**2).mean())})).round(3))
print(A.cat_summary(o, by=('family','variant'), ft=('ft_engine','ft_model_cv','ft_design')).round(3).to_string())
for f in ['ft_model_cv','ft_engine','ft_design']:
    if f+'_lo' in o: print(f, A.min_table_cov(o, f))
# self-check: predicted vs measured per table
meas = o.groupby(['table','variant']).apply(lambda g: pd.Series({'z_meas':(g.z.abs()>1.96).mean(),'zcv_meas':(g.z_cv.abs()>1.96).mean(),
      'ftcv_meas':((g.ft_model_cv_lo<=g.T_true)&(g.T_true<=g.ft_model_cv_hi)).mean(),
      'fteng_meas':((g.ft_engine_lo<=g.T_true)&(g.T_true<=g.ft_engine_hi)).mean() if 'ft_engine_lo' in g else np.nan}))
pred = p.groupby(['table','variant'])[['z_share','z_share_cv','ft_model_cv','ft_engine']].mean()
j = meas.join(pred)
print(j.groupby('variant').mean().round(3))
print('mean abs diff pred vs measured (per table):')
j['d_zcv']=(j.z_share_cv-j.zcv_meas).abs(); j['d_ftcv']=(j.ft_model_cv-j.ftcv_meas).abs(); j['d_eng']=(j.ft_engine-j.fteng_meas).abs()
print(j.groupby('variant')[['d_zcv','d_ftcv','d_eng']].agg(['mean','max']).round(3))
