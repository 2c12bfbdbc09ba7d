"""What a dry run does not load (issue 30 item 7: the dry run in ≤ 10 s): litellm (seconds to import; a dry run
calls nothing), scipy.stats (the bank-free ranker's, imported only for a task with no bank), and a task's
Jinja template compiled once, not once per document. Checked in fresh processes, by what they import."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip()


def test_the_command_line_starts_without_scipy_stats():
    assert _run("""
        import sys
        import lm_eval_adaptive.cli.main
        print("scipy.stats" in sys.modules, "litellm" in sys.modules)
    """) == "False False"


def test_a_prompt_only_litellm_model_imports_no_litellm_and_makes_no_call():
    out = _run("""
        import sys
        from lm_eval_adaptive.harness.lm_eval_compat import build_lm
        lm = build_lm("litellm", "model=openai/x", calls=False)
        print("litellm" in sys.modules, type(lm).__name__, callable(lm.apply_chat_template))
        try:
            lm._litellm.completion  # what the model's calls go through
        except RuntimeError as e:
            print("refused:", "makes no call" in str(e))
        import litellm  # a later import gets the real litellm
        print(hasattr(litellm, "completion"))
    """)
    assert out.splitlines() == ["False LiteLLMChatCompletion True", "refused: True", "True"]


def test_a_template_is_compiled_once_and_renders_as_before():
    out = _run("""
        from lm_eval import utils
        before = utils.apply_template("{{a}} and {{b}}", {"a": 1, "b": "x"})
        from lm_eval_adaptive.harness.lm_eval_compat import compile_templates_once
        compile_templates_once()
        compile_templates_once()  # once is enough; a second call changes nothing
        t1, t2 = utils.env.from_string("{{a}}!"), utils.env.from_string("{{a}}!")
        print(before == utils.apply_template("{{a}} and {{b}}", {"a": 1, "b": "x"}), t1 is t2, t1.render(a=2))
    """)
    assert out == "True True 2!"
