"""An OpenAI-compatible endpoint replaying recorded real outputs (offline tests and demos).

``store`` (:class:`~lm_eval_adaptive.replay.store.ReplayStore`: the recorded data and the
answer to a prompt), ``matching`` (which recorded item a prompt asks for), ``server``
(:class:`~lm_eval_adaptive.replay.server.ReplayServer`: HTTP, faults, statistics) and
``errors``; the command is :mod:`lm_eval_adaptive.cli.replay_server`.
"""
