"""Each harness warning once, no litellm banner (issue 23 items 5 and 6): with the real lm_eval loggers
and the real litellm error path."""

from __future__ import annotations

import io
import logging
import uuid

import litellm
import pytest

from lm_eval_adaptive.cli.logs import HARNESS_LOGGERS, OnceFilter, quiet_third_party


@pytest.fixture
def captured():
    """The two harness loggers' records, whatever earlier tests did to logging (a harness run may set
    levels, stop propagation or disable existing loggers): the handler sits on the loggers themselves,
    after their filters, and their level and state are restored afterwards."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    loggers = [logging.getLogger(n) for n in ("lm_eval.api.task", "lm_eval.models.api_models")]
    saved = [(lg.level, lg.disabled, lg.propagate) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.WARNING)
        lg.disabled = False
        lg.propagate = False  # counted once, by this handler
    yield buf
    for lg, (level, disabled, propagate) in zip(loggers, saved):
        lg.removeHandler(handler)
        lg.setLevel(level)
        lg.disabled, lg.propagate = disabled, propagate


def test_a_repeated_harness_warning_is_shown_once_whatever_task_it_names(captured):
    quiet_third_party()
    quiet_third_party()  # idempotent: one filter
    import lm_eval.api.task as task_module  # the harness's own logger objects
    import lm_eval.models.api_models as api_models

    assert sum(isinstance(f, OnceFilter) for f in task_module.eval_logger.filters) == 1
    tag = uuid.uuid4().hex  # the filter is the process's: messages no earlier test of this worker logged
    for task in ("wmt24_en-de", "wmt24_en-es", "wmt24_en-de"):
        task_module.eval_logger.warning(f"{task}: Custom kwargs can be passed to `--metadata` in console. {tag}")
    for _ in range(3):
        api_models.eval_logger.warning(f"Cannot determine EOS string to pass to stop sequence. {tag}")
    api_models.eval_logger.warning(f"another warning {tag}")
    api_models.eval_logger.error(f"an error is never held back {tag}")
    api_models.eval_logger.error(f"an error is never held back {tag}")
    out = captured.getvalue()
    assert out.count("Custom kwargs") == 1 and out.count("Cannot determine EOS") == 1
    assert out.count("another warning") == 1 and out.count("an error is never held back") == 2
    assert all(name.startswith("lm_eval.") for name in HARNESS_LOGGERS)


def test_litellm_prints_no_banner_before_its_error(capsys):
    """Without it, these two calls print 3 banners ("Give Feedback / Get Help", "Provider List")."""
    quiet_third_party()
    with pytest.raises(Exception):  # nothing listens on port 9: a connection error, litellm's own error path
        litellm.completion(model="openai/x", api_key="k", api_base="http://127.0.0.1:9/v1", max_retries=0,
                           num_retries=0, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(Exception):  # a provider litellm does not know
        litellm.completion(model="no-such-provider/x", messages=[{"role": "user", "content": "hi"}])
    out, err = capsys.readouterr()
    assert "Give Feedback" not in out + err and "Provider List" not in out + err
