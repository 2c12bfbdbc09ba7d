import sys, pandas as pd, numpy as np, analyze as A
pd.set_option('display.width',250); pd.set_option('display.max_columns',40); pd.set_option('display.max_rows',200)
dfs=[pd.read_parquet(f'results/{f}.parquet') for f in sys.argv[1:]]
r=pd.concat(dfs)
print(A.ranker_summary(r, by=('config',)).round(3).to_string())
print(A.ranker_summary(r, by=('family','config')).round(3)[['family','config','conf_pairs','conf_acc','tie_recall','tie_prec','tau','random_tau','items','worst_table_acc']].to_string())
