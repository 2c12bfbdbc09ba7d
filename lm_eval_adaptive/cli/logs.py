"""What third-party libraries may print during a command: each harness warning once, no litellm banners.

The harness logs some warnings again for every task it loads and every request batch it builds
("<task>: Custom kwargs can be passed to `--metadata` …" for every task config with a dataset loader;
"Cannot determine EOS string …" for an API model without a tokenizer), and litellm prints a
"Give Feedback / Get Help" banner of several lines before every error it raises. A run shows each
such warning once (the first time) and no banner.
"""

from __future__ import annotations

import logging
import re

__all__ = ["HARNESS_LOGGERS", "OnceFilter", "quiet_third_party"]

#: The harness's loggers whose warnings repeat (each module logs through its own ``getLogger(__name__)``).
HARNESS_LOGGERS = ("lm_eval.api.task", "lm_eval.models.api_models", "lm_eval.api.model", "lm_eval.evaluator",
                   "lm_eval.tasks", "lm_eval.models.openai_completions", "lm_eval.models.huggingface")

#: A leading task name (``wmt24_en-de: …``): the same warning of another task is the same warning.
_TASK_PREFIX = re.compile(r"^[\w.\-]+: ")


class OnceFilter(logging.Filter):
    """Lets each warning through once per process (by logger and text, a leading ``task: `` ignored);
    debug and info records and errors always pass."""

    def __init__(self):
        super().__init__()
        self._seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        try:
            text = record.getMessage()
        except Exception:  # a record whose arguments do not format: let logging report it
            return True
        key = (record.name, _TASK_PREFIX.sub("", text, count=1))
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


_ONCE = OnceFilter()


def quiet_third_party(*, litellm_now: bool = True) -> None:
    """Each harness warning once (:class:`OnceFilter` on :data:`HARNESS_LOGGERS`) and no litellm banner
    (``litellm.suppress_debug_info``). Idempotent. ``litellm_now=False``: the harness loggers only;
    importing litellm takes seconds, and ``run --adaptive`` quiets it itself just before it builds the
    model, after the checks that need no task loaded (``harness/run.py``)."""
    for name in HARNESS_LOGGERS:
        lg = logging.getLogger(name)
        if _ONCE not in lg.filters:
            lg.addFilter(_ONCE)
    if litellm_now:
        import litellm

        litellm.suppress_debug_info = True
