"""What a harness task's YAML says, read without loading the task (seconds of imports and documents).

The checks that need only a task's metric names run before the harness loads anything
(:func:`~lm_eval_adaptive.harness.binding.check_banks`): the task is looked up among the YAML files
under ``--include_path`` (the folder the harness indexes first), its ``include:`` chain merged as the
harness merges it (the including file's keys win), and its ``metric_list`` read. A task that is not
found there (a task of the harness's own collection), or whose YAML says nothing of its metrics,
gives None: the caller falls back to the check on the loaded task. ``!function`` and other tags are
not evaluated.
"""

from __future__ import annotations

from pathlib import Path

import yaml

__all__ = ["task_yaml", "yaml_task_metrics"]

_MAX_INCLUDES = 16


class _TagsAsText(yaml.SafeLoader):
    """A safe loader that reads every tagged node (``!function utils.f``) as its plain value."""


def _untagged(loader, suffix, node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)


_TagsAsText.add_multi_constructor("!", _untagged)


def _read(path: Path) -> dict | None:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_TagsAsText)  # noqa: S506 - a safe loader
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def _merged(path: Path, depth: int = 0) -> dict | None:
    """The YAML at ``path`` with its ``include:`` chain merged under it (the harness's rule)."""
    data = _read(path)
    if data is None or depth > _MAX_INCLUDES:
        return data
    inc = data.get("include")
    if isinstance(inc, str):
        base = _merged((path.parent / inc) if not Path(inc).is_absolute() else Path(inc), depth + 1)
        if base is not None:
            data = {**base, **{k: v for k, v in data.items() if k != "include"}}
    return data


def task_yaml(task: str, include_path) -> dict | None:
    """The merged YAML of the task named ``task`` under ``include_path`` (a folder or a list of them;
    the harness indexes ``*.yaml``), None when none names it."""
    if not task or not include_path:
        return None
    roots = include_path if isinstance(include_path, (list, tuple)) else [include_path]
    for root in roots:
        root = Path(root)
        files = [root] if root.is_file() else sorted(root.rglob("*.yaml")) if root.is_dir() else []
        for f in files:
            try:
                if task not in f.read_text(encoding="utf-8", errors="replace"):
                    continue  # cheap: most files never name the task
            except OSError:
                continue
            data = _read(f)
            if data is not None and data.get("task") == task:
                return _merged(f)
    return None


def yaml_task_metrics(task: str, include_path) -> list[str] | None:
    """The metric names of ``task``'s ``metric_list`` as its YAML under ``include_path`` gives them; None
    when the task is not found there or its YAML lists no metrics."""
    data = task_yaml(task, include_path)
    metrics = data.get("metric_list") if data else None
    if not isinstance(metrics, list):
        return None
    names = [str(m["metric"]) for m in metrics if isinstance(m, dict) and isinstance(m.get("metric"), str)]
    return names or None
