"""Ranking and estimating with no calibration history, with intervals valid at every look (issue 31;
docs/cold-start.md): confidence sequences for a mean sampled without replacement
(:mod:`.confidence_sequence`), pair decisions from paired differences (:mod:`.pair_decisions`), the
bank-free ranker (:mod:`.bank_free_ranker`), one model to an interval width (:mod:`.bank_free_test`) and the history curve of ``backtest --history-models``
(:mod:`.history_backtest`)."""
