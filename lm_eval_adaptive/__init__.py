"""lm-eval-adaptive: computerized adaptive testing for LLM evaluation with continuous scores."""

__version__ = "0.1.0"

from lm_eval_adaptive.display import install_shown_logs  # noqa: E402

install_shown_logs()  # the package's log lines show names with control and bidi characters escaped
