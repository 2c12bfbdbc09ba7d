"""``python -m lm_eval_adaptive.cli``: the command line."""

import sys

from lm_eval_adaptive.cli.main import main

sys.exit(main())
