"""The ``lm-eval-adaptive`` console script.

``run --adaptive`` with a bad bank, a metric the task lacks, a model without a price or an output that
cannot be written is refused here (:func:`~lm_eval_adaptive.cli.run_early_checks.refuse_before_parsing`)
before the command line's modules are imported (scipy, pandas' readers, the harness's task index:
about two seconds); then everything goes to :func:`lm_eval_adaptive.cli.main.main`, told that these
checks were made (the run's plan makes them once more, on the harness's parsed configuration).
"""

from __future__ import annotations

import sys

from lm_eval_adaptive.cli.run_early_checks import refuse_before_parsing, refused
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.redaction import redacting

__all__ = ["main"]


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        with redacting(argv):  # the refusal shows no secret of the command line, as every output
            try:
                refuse_before_parsing(argv[1:])
            except InputError as e:
                return refused(e)
    from lm_eval_adaptive.cli.main import main as full  # noqa: PLC0415 - the command line's modules, once needed

    return full(argv, checked_early=bool(argv) and argv[0] == "run")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
