"""The paid attempts of ``run --adaptive``: each one reserved against the task's budget before it is
sent, retried by the policy every paid call shares, and charged when it fails after sending
(:class:`AttemptBilling`); how many attempts a harness model allows (:func:`harness_attempts`)."""

from __future__ import annotations

import logging
import time

from lm_eval_adaptive.data.prices import upper_estimate
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness import lm_eval_compat as compat
from lm_eval_adaptive.harness.billing import ModelFailed, RetryPolicy, may_have_been_billed
from lm_eval_adaptive.harness.output_limits import request_output_bound
from lm_eval_adaptive.harness.scorer import TEMPLATE_TOKENS

__all__ = ["AttemptBilling", "BudgetRefused", "harness_attempts"]

log = logging.getLogger("lm_eval_adaptive")


class BudgetRefused(ModelFailed):
    """An attempt was not sent: its worst case did not fit under ``--budget-usd``."""


def harness_attempts(model_args) -> int:
    """Attempts per call: the harness model's ``max_retries`` argument (its own meaning: attempts
    in all), else the harness API models' default, 3."""
    from lm_eval.utils import simple_parse_args_string

    args = dict(model_args) if isinstance(model_args, dict) else simple_parse_args_string(model_args or "")
    try:
        return max(1, int(args.get("max_retries", 3)))
    except (TypeError, ValueError):
        raise InputError(f"--model_args max_retries={args.get('max_retries')!r}: give a whole number >= 1") from None


class AttemptBilling:
    """Every attempt of a batch's evaluation is a paid call of its own (``run --adaptive``).

    The harness's and litellm's retries are off (``build_lm(own_retries=True)``); a batch whose
    evaluation fails with an error :func:`~lm_eval_adaptive.harness.billing.is_retryable` accepts
    is evaluated again (:class:`RetryPolicy`: backoff with full jitter, at most the model's
    ``max_retries`` attempts); the harness's cache keeps the answers an attempt got, so a retry
    sends only what is missing. Before the LM sends requests (:meth:`before_send`, via
    :func:`~lm_eval_adaptive.harness.lm_eval_compat.before_requests`) their worst case (prompt
    bytes plus a chat-template allowance per request, its largest output limit × ``n`` output tokens, at the
    model's price) is reserved against the task's budget: when spent + reserved + it exceeds the
    budget, nothing is sent (:class:`BudgetRefused`) and the task stops on its budget. A failed
    attempt is charged at once: the usage of what was answered, or its whole reservation when the
    request was sent and never answered (:func:`may_have_been_billed`: a timeout, a dropped
    connection), since the provider bills what it finished even when the client gave up.
    ``on_sent(reserved_usd)``, when set, is called before requests are sent, with their worst case, and
    ``on_failed(usd)`` after each failed attempt has been charged ``usd`` and counted (``run --adaptive``
    journals both).
    """

    def __init__(self, price, lm, policy: RetryPolicy):
        self.price, self.lm, self.policy = price, lm, policy
        self.attempts = self.retries = self.billed_failures = 0
        self.billed_failures_usd = 0.0
        self._test = None  # the test the batch in flight charges
        self._reserved = 0.0  # the worst case of what the attempt in flight sent
        self.on_sent = None  # called with the worst case of requests about to be sent
        self.on_failed = None  # called after a failed attempt is charged and counted

    def counts(self) -> dict:
        """The attempts sent, the retries among them, and the failed attempts charged as billed."""
        return {"attempts": self.attempts, "retries": self.retries, "billed_failures": self.billed_failures,
                "billed_failures_usd": self.billed_failures_usd}

    @property
    def reserved_usd(self) -> float:
        """The worst case of what the attempt in flight sent (what an answer without usage is charged)."""
        return self._reserved

    def upper_usd(self, request_type: str, requests) -> float:
        """The most the requests can cost (their prompt bytes bound their tokens)."""
        inp = out = 0
        for inst in requests:
            inp += TEMPLATE_TOKENS + sum(len(str(a).encode("utf-8")) for a in inst.args if not isinstance(a, dict))
            if request_type == "generate_until":  # the request's worst case as sent (every limit, × n)
                gk = next((a for a in inst.args if isinstance(a, dict)), {}) or {}
                out += request_output_bound(gk, compat.default_max_gen_toks(self.lm))
            else:
                out += 1
        return float(upper_estimate(self.price, inp, out))

    def before_send(self, request_type: str, requests) -> None:
        worst = self.upper_usd(request_type, requests)
        test = self._test
        if test is not None and test.budget is not None and \
                test.spent + self._reserved + worst > test.budget * (1 + 1e-12):
            raise BudgetRefused(f"not sent: its worst case ${worst:.6g} does not fit under the budget (spent "
                                f"${test.spent:.6g} of ${test.budget:.6g})")
        if self.on_sent is not None:
            self.on_sent(worst)
        self._reserved += worst

    def evaluate(self, test, n_docs: int, attempt_fn):
        """``attempt_fn()`` (one harness evaluation of a batch), retried; None when the budget
        refused an attempt (nothing of it was sent). ``attempt_fn`` returns its result, or raises
        with ``known`` (USD of what was answered) set on the error."""
        def before_sleep(state) -> None:
            e = state.outcome.exception()
            log.info("%d document(s): %s; retry %d in %.2fs", n_docs, f"{type(e).__name__}: {e}"[:300],
                     state.attempt_number, state.next_action.sleep if state.next_action else 0.0)

        try:
            for attempt in self.policy.retrying(sleep=time.sleep, before_sleep=before_sleep):
                with attempt:
                    n = attempt.retry_state.attempt_number
                    self._test, self._reserved = test, 0.0
                    try:
                        out = attempt_fn()
                    except Exception as e:
                        sent = self._reserved > 0
                        known = float(getattr(e, "known_usd", 0.0) or 0.0)
                        usd = known
                        if sent and may_have_been_billed(e):
                            usd = max(known, self._reserved)
                            self.billed_failures += 1
                            self.billed_failures_usd += usd
                        if usd > 0:
                            test.charge(usd)
                        if sent:
                            self.attempts += 1
                            self.retries += n > 1
                        if self.on_failed is not None:
                            self.on_failed(usd if usd > 0 else 0.0)
                        raise
                    finally:
                        self._test = None
                    self.attempts += 1
                    self.retries += n > 1
                    return out
        except BudgetRefused as e:
            log.warning("%d document(s): %s", n_docs, e)
            return None
