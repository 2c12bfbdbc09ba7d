"""The checks of ``run --adaptive`` that need no harness task loaded, in the order the run makes them.

The banks (:func:`~lm_eval_adaptive.harness.bank_source.parse_banks`: a file or a shipped name, close
matches offered, the task's metric read from its YAML under ``--include_path``; then
:func:`~lm_eval_adaptive.harness.binding.check_banks`: each bank read, made for this task and metric),
then the model's price (:func:`~lm_eval_adaptive.data.price_map.resolve_prices`: a model without a known
price is refused unless ``--price`` prices it). :func:`check_before_loading` is called twice: by the
command line on the options it reads before it builds the harness's parser (``cli/run_early_checks.py``:
a bad input is refused in about a second, before lm-eval's task index or ``datasets`` is imported), and
by :func:`~lm_eval_adaptive.harness.run.plan_adaptive_run` on the harness's parsed configuration, so
that every way into the run makes the same checks and says the same thing. Nothing here imports lm-eval
(but to read a ``--model_args`` string) nor litellm.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lm_eval_adaptive.data.price_map import price_policy, resolve_prices
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.bank_source import parse_banks
from lm_eval_adaptive.harness.binding import check_banks

__all__ = ["BeforeLoading", "check_before_loading", "check_device", "task_names", "model_name"]


@dataclass(frozen=True)
class BeforeLoading:
    """What the checks resolved: each task's bank specs (None when a ``--tasks`` value is a path or a
    glob, which only the harness resolves), the model's name, the price policy and the model's price."""

    bank_paths: dict | None
    model: str
    policy: object
    price: object


def task_names(tasks) -> list[str] | None:
    """The ``--tasks`` names when each is a plain task name (not a YAML file, folder or glob, which only
    the harness can resolve), else None."""
    if not tasks:
        return None
    names = [t.strip() for t in (tasks.split(",") if isinstance(tasks, str) else
                                 [x for task in tasks for x in str(task).split(",")]) if t.strip()]
    if not names or any(any(c in t for c in "*?[/\\") or t.endswith((".yaml", ".yml")) or os.path.exists(t)
                        for t in names):
        return None
    return list(dict.fromkeys(names))


def model_name(model, model_args) -> str:
    """The name a run prices its model by: ``model=`` (or ``pretrained=``) of ``--model_args`` (a mapping,
    or a ``k=v,...`` string as the harness writes it), else ``--model``."""
    ma = _model_args(model_args)
    return str(ma.get("model") or ma.get("pretrained") or model)


def _model_args(model_args) -> dict:
    if isinstance(model_args, dict):
        return model_args
    if isinstance(model_args, str) and model_args:
        from lm_eval.utils import simple_parse_args_string  # noqa: PLC0415 - only for a string (a YAML config)

        return simple_parse_args_string(model_args)
    return {}


def check_device(device, model_args) -> None:
    """Refuse ``--device`` with a different ``device=`` in ``--model_args`` (the same value, or only one of
    them, is one device: the model's own argument is used, :func:`~lm_eval_adaptive.harness.lm_eval_compat.build_lm`)."""
    own = _model_args(model_args).get("device")
    if device is not None and own is not None and str(own).strip() != str(device).strip():
        raise InputError(f"--device {device} and device={own} in --model_args name two devices; give one")


def check_before_loading(tasks, include_path, model, model_args, *, banks=(), metric: str | None = None,
                         prices=(), note=None, device=None) -> BeforeLoading:
    """Refuse (:class:`~lm_eval_adaptive.errors.InputError`, :class:`~lm_eval_adaptive.errors.BankError`)
    what the run would refuse before loading a task: a bank that is neither a file nor a shipped name, a
    ``--metric`` the task's YAML does not list, a bank made for another task or metric, a model without a
    known price and no ``--price`` for it. ``tasks``: the harness's ``--tasks`` (a list or a
    comma-separated string); ``banks``, ``metric``, ``prices``: ``--bank``, ``--metric``, ``--price``;
    ``note(line)`` is told each shipped bank taken without ``--bank``; ``device``: ``--device``
    (:func:`check_device`)."""
    check_device(device, model_args)
    named = task_names(tasks)
    bank_paths = None
    if named is not None:
        bank_paths = parse_banks(list(banks or ()), named, metric=metric, several=True, note=note,
                                 include_path=include_path, bank_free=True)  # None: no bank (bank-free run)
        check_banks({t: v for t, v in bank_paths.items() if v}, metric=metric, include_path=include_path)
    name = model_name(model, model_args)
    policy = price_policy(list(prices or ()) or None, bare=name)
    price = resolve_prices([(name, name, model)], policy)[name]
    return BeforeLoading(bank_paths=bank_paths, model=name, policy=policy, price=price)
