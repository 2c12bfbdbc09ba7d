"""Check: the prototype ranker in its baseline configuration reproduces the engine's AdaptiveRanker."""
import sys, time
import numpy as np
sys.path.insert(0, '.')
import harness as H

tabs = sys.argv[1:] or ["wmt24/en-de/chrf", "alpaca_eval/judge", "wmt25/en-de_DE/XCOMET-XL", "wmt25/en-ja_JP/GEMBA-ESA-CMDA"]
for name in tabs:
    t0 = time.time()
    e = H.ranker_records(name, {}, {}, seeds=[0], engine=True, label="engine")
    p = H.ranker_records(name, {}, {"est": {"kind": "plain"}, "rule": "theta_indep"}, seeds=[0], label="proto")
    same = all((x["status"] == y["status"]) and abs(x["d"] - y["d"]) < 1e-9 and x["items"] == y["items"]
               and x["tau"] == y["tau"] for x, y in zip(e, p))
    print(name, "identical" if same else "DIFFER", len(e), round(time.time() - t0, 1), "s")
    if not same:
        for x, y in zip(e, p):
            print(x["fold"], x["status"], y["status"], x["d"], y["d"], x["items"], y["items"])
