"""The harness's command-line conventions that ``rank`` and ``refresh`` accept.

* ``--model TYPE`` and ``--model_args ARGS``, as ``lm-eval run`` spells them. Each
  ``--model_args`` is one model: its values (``key=val,key2=val2`` or ``key=val key2=val2``)
  are that model's arguments, as in ``lm-eval run``. One ``--model`` gives the type of every
  ``--model_args``; otherwise there is one ``--model`` per ``--model_args``, paired in order.
  They add to ``--models TYPE:ARGS …`` (``rank``) or ``--add TYPE:ARGS …`` (``refresh``).
* ``--tasks a,b`` or ``--tasks a b``: several tasks, each ranked (or refreshed) and reported
  in turn, each in its own run folder ``DIR/TASK`` of ``--output DIR``.
* ``--output_path DIR``: the same as ``--output DIR``.
* ``--device D`` and ``--batch_size N``, as ``lm-eval run`` spells them: every model's ``device=D``
  and ``batch_size=N`` (:func:`model_specs` writes them into each ``TYPE:ARGS``; a model whose own
  arguments already say another value is refused, the same one is one value). ``run`` does the same:
  ``device=cpu`` in ``--model_args`` is the device, ``--device`` with another value is refused.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.redaction import redact_text

__all__ = ["add_model_arguments", "model_specs", "refuse_spaced_pairs", "task_folder", "task_list"]

#: a space, then ``key=``: the start of another argument written where only commas separate them
_SPACED_PAIR = re.compile(r"\s+(?=[A-Za-z_][\w.\-]*=)")


def refuse_spaced_pairs(flag: str, text: str, values) -> None:
    """Refuse argument values (``values``: the parsed ``key=value`` values of ``text``) in which a space
    is followed by ``key=``: where only commas separate arguments (``TYPE:ARGS`` specs, ``run``'s
    ``--model_args``), ``model=openai/X key=SECRET`` would send ``openai/X key=SECRET`` as the model id,
    secret included."""
    for v in values:
        m = _SPACED_PAIR.search(str(v))
        if m:
            key = str(v)[m.end():].split("=", 1)[0]
            raise InputError(f"{flag} {text!r}: a space before '{key}=' makes it part of another argument's "
                             f"value; separate the arguments with commas (model=...,{key}=...)")


def add_model_arguments(parser: argparse.ArgumentParser, *, adds_to: str) -> None:
    """``--model TYPE`` (repeatable) and ``--model_args ARGS…`` (repeatable, one model each)."""
    g = parser.add_argument_group("harness model arguments (as in lm-eval run)")
    g.add_argument("--model", action="append", default=None, metavar="TYPE",
                   help="harness model type, e.g. litellm: of every --model_args when given once, else "
                        "one --model per --model_args, in order")
    g.add_argument("--model_args", action="append", nargs="+", default=None, metavar="ARGS",
                   help=f"one model's arguments, key=val,key2=val2 (or key=val key2=val2); repeat "
                        f"--model_args for each model (they add to {adds_to})")
    g.add_argument("--device", default=None, metavar="DEVICE",
                   help="every model's device (cuda, cuda:0, cpu, mps), as device=DEVICE in its arguments")
    g.add_argument("--batch_size", default=None, metavar="N",
                   help="every model's batch size (the harness's: requests per forward pass, or auto)")


def model_specs(specs, types, arg_groups, *, flag: str = "--models", device=None, batch_size=None) -> list[str]:
    """``specs`` (``TYPE:ARGS`` strings, given with ``flag``) plus one ``TYPE:ARGS`` per ``--model_args``,
    each with ``device`` and ``batch_size`` (``--device``, ``--batch_size``) in its arguments (module
    docstring)."""
    return [_with_flags(s, flag, device=device, batch_size=batch_size)
            for s in _specs(specs, types, arg_groups, flag=flag)]


def _with_flags(spec: str, flag: str, **values) -> str:
    head, sep, rest = str(spec).partition(":")
    own = {k.strip(): v.strip() for k, _, v in (kv.partition("=") for kv in rest.split(",")) if _}
    add = []
    for key, value in values.items():
        if value is None:
            continue
        value = str(value).strip()
        if key in own and own[key] != value:
            raise InputError(f"--{key} {value} and {key}={own[key]} in {flag} {spec!r} disagree; give one")
        if key not in own:
            add.append(f"{key}={value}")
    return spec if not add or not sep else f"{head}:{','.join(x for x in (rest, *add) if x)}"


def _specs(specs, types, arg_groups, *, flag: str) -> list[str]:
    specs = list(specs or [])
    for spec in specs:
        refuse_spaced_pairs(flag, spec, str(spec).partition(":")[2].split(","))
    types = [t.strip() for t in types or []]
    groups = [list(g) for g in arg_groups or []]
    if not types and not groups:
        return specs
    if not groups:
        raise InputError("--model TYPE needs --model_args with the model's arguments (model=...), "
                         "one --model_args per model")
    if not types:
        raise InputError("--model_args needs --model TYPE (the harness model type, e.g. litellm)")
    if any(not t for t in types):
        raise InputError("--model: give the harness model type, e.g. litellm")
    if len(types) == 1:
        types = types * len(groups)
    elif len(types) != len(groups):
        raise InputError(f"{len(types)} --model and {len(groups)} --model_args: give one --model for every "
                         f"--model_args, or one --model per --model_args, in order")
    out = []
    for mtype, values in zip(types, groups):
        if any(v.lstrip().startswith("{") for v in values):
            raise InputError(f"--model_args {' '.join(values)!r}: give key=val pairs (JSON is not "
                             f"accepted by rank and refresh)")
        # key=val,key2=val2 or key=val key2=val2, in one value or several
        parts = [p.strip() for v in values for p in re.split(r",|" + _SPACED_PAIR.pattern, v) if p.strip()]
        if not parts:
            raise InputError("--model_args: give the model's arguments, e.g. model=gpt-4o-mini")
        out.append(f"{mtype}:{','.join(parts)}")
    return specs + out


def task_list(values) -> list[str]:
    """Task names from ``--tasks`` values (space- and/or comma-separated), in order; a repeat is refused."""
    tasks = [t.strip() for v in values or [] for t in str(v).split(",") if t.strip()]
    dup = sorted({t for t in tasks if tasks.count(t) > 1})
    if dup:
        raise InputError(f"--tasks: {', '.join(dup)} named twice")
    return tasks


def task_folder(root, task: str) -> Path:
    """The run folder of one of several tasks: ``root/task``; refused when the name is no folder name."""
    if redact_text(task) != task:  # a file name holds no secret
        raise InputError(f"--tasks {redact_text(task)!r}: the task's folder name DIR/TASK would hold a secret")
    if task in (".", "..") or any(c in task for c in "/\\\0"):
        raise InputError(f"--tasks {task!r}: with several tasks each gets the folder DIR/TASK, and this "
                         f"name cannot be one; run it on its own")
    return Path(root) / task
