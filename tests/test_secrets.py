"""No secret in any output: a secret of each form, planted in every place a user can put one, never shows.

The forms: a secret-named environment variable (``FOO_API_KEY``), ``LM_EVAL_ADAPTIVE_REDACT``,
``--model_args``/``--models``/``--add`` keys ``api_key=``, ``key=``, ``token=``,
``aws_secret_access_key=``, ``vertex_credentials=`` (a value with spaces), ``password=`` (a value
with ``@`` and ``/``), URL user info (``user:pass@`` with ``@`` and ``/`` in the password, and
``TOKEN@``), an environment URL with a password (``OPENAI_API_BASE``), and a ``--redact`` value.
Each command runs once against the replay endpoint (a handful of items): ``run --adaptive``,
``rank``, ``leaderboard``, ``refresh``, ``leaderboard render``, and an error; every file in the
output folder and the captured stdout and stderr are searched for every planted string.
Then the redaction itself, form by form, and what it must leave alone.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

from lm_eval_adaptive.cli.main import build_parser, main
from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel
from lm_eval_adaptive.redaction import (
    REDACT_ENV,
    RedactingStream,
    is_secret_env_name,
    is_secret_key,
    redact,
    redact_text,
    redacting,
    secrets_in,
)

REPO = Path(__file__).resolve().parents[1]
WMT = "wmt24_en-de"

# every planted secret: its form -> its value (each unique, so a hit names the form that leaked)
PLANTED = {
    "env FOO_API_KEY": "envsecret-FOO-0001",
    "env LM_EVAL_ADAPTIVE_REDACT": "envlisted-proj-0002",
    "api_key=": "apikey-S3cr3t-0003",
    "key=": "plainkey-S3cr3t-0004",
    "token=": "tok-S3cr3t-0005",
    "aws_secret_access_key=": "aws/S3cr3t+0006",
    "vertex_credentials= (spaces)": "vertex creds S3cr3t 0007",
    "password= (@ and /)": "pa@ss/w0rd-0008",
    "URL user:pass@ (@ and / in it)": "url@pa/ss-0009",
    "URL TOKEN@": "urltoken-S3cr3t-0010",
    "--redact": "org-redact-me-0011",
    "env URL password": "envurlpass-0012",
    # credentials litellm (or a provider's own SDK) reads under names with no *_KEY/*_TOKEN/*_SECRET end
    "env AWS_BEARER_TOKEN_BEDROCK": "bedrockbearer-0013",
    "env CLARIFAI_PAT": "clarifaipat-0014",
    "env GITHUB_PAT": "githubpat-0015",
    # 'model=... api_token=SECRET' as one --model_args value (space-separated, not comma-separated)
    "spaced --model_args api_token=": "spacedtok-0016",
}

P = PLANTED


def model_args(model: str) -> str:
    """A model's arguments carrying every argument-borne form (and the env- and --redact-only values
    under keys that are not secret-named, so only those ways can remove them)."""
    return (f"model={model},api_key={P['api_key=']},key={P['key=']},token={P['token=']},"
            f"aws_secret_access_key={P['aws_secret_access_key=']},"
            f"vertex_credentials={P['vertex_credentials= (spaces)']},password={P['password= (@ and /)']},"
            f"base_url=http://user:{P['URL user:pass@ (@ and / in it)']}@127.0.0.1:9/v1,"
            f"proxy_url=http://{P['URL TOKEN@']}@proxy.example:8080/,"
            f"organization={P['--redact']},project={P['env LM_EVAL_ADAPTIVE_REDACT']},"
            f"notes={P['env FOO_API_KEY']},region_note={P['env AWS_BEARER_TOKEN_BEDROCK']},"
            f"user_note={P['env CLARIFAI_PAT']},org_note={P['env GITHUB_PAT']}")


def spaced_model_args(model: str) -> str:
    """One ``--model_args`` value with every form above, then a secret after a space (``... api_token=X``)."""
    return model_args(model) + f" api_token={P['spaced --model_args api_token=']}"


def leaks(text: str) -> list[str]:
    """The forms whose planted secret (or a telling piece of it) is in ``text``."""
    return [form for form, value in PLANTED.items() if value in text or value.split("-")[-1] + "-" in text
            or value[:12] in text]


def files_text(root) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_bytes().decode("utf-8", "replace")
            for p in Path(root).rglob("*") if p.is_file()}


def assert_no_leak(root, captured, *, skip=()):
    found = {name: leaks(text) for name, text in files_text(root).items() if name not in skip}
    found["stdout"] = leaks(captured.out)
    found["stderr"] = leaks(captured.err)
    found = {k: v for k, v in found.items() if v}
    assert not found, found


@pytest.fixture(scope="module")
def server(replay_server):
    """The replay endpoint, reached through an OPENAI_API_BASE whose URL carries a password, with the
    secret environment variables set for the module."""
    env = {"FOO_API_KEY": P["env FOO_API_KEY"], "AWS_BEARER_TOKEN_BEDROCK": P["env AWS_BEARER_TOKEN_BEDROCK"],
           "CLARIFAI_PAT": P["env CLARIFAI_PAT"], "GITHUB_PAT": P["env GITHUB_PAT"]}
    saved = {k: os.environ.get(k) for k in (*env, REDACT_ENV, "OPENAI_API_BASE")}
    os.environ.update(env)
    os.environ[REDACT_ENV] = P["env LM_EVAL_ADAPTIVE_REDACT"] + ",another-listed-value"
    os.environ["OPENAI_API_BASE"] = replay_server.url.replace("http://", f"http://envuser:{P['env URL password']}@")
    yield replay_server
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    path = tmp_path_factory.mktemp("bank") / "bank.json"
    ids = [str(i) for i in range(60)]
    ItemBank(item_ids=np.array(ids, dtype=object), b=np.random.default_rng(0).normal(0, 1, len(ids)),
             model=ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=1.0,
             input_tokens=100.0, output_tokens=100.0, task=WMT, metric="bleu").save(path)
    return path


def _capture(capsys, argv):
    capsys.readouterr()
    rc = main(argv)
    return rc, capsys.readouterr()


# ------------------------------------------------------------------------------- run --adaptive
class Captured:
    def __init__(self, out, err):
        self.out, self.err = out, err


def _run_captured(argv):
    """(exit status, captured stdout and stderr) of the command ``argv`` (module fixtures cannot use capsys)."""
    import io
    import sys

    mp = pytest.MonkeyPatch()
    o, e = io.StringIO(), io.StringIO()
    mp.setattr(sys, "stdout", o)
    mp.setattr(sys, "stderr", e)
    try:
        rc = main(argv)
    finally:
        mp.undo()
    return rc, Captured(o.getvalue(), e.getvalue())


@pytest.fixture(scope="module")
def adaptive_run(server, bank, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    rc, captured = _run_captured(["run", "--model", "litellm", "--model_args", model_args("openai/GPT-4"),
                                  "--tasks", WMT, "--include_path", str(REPO / "task_configs"), "--apply_chat_template",
                                  "--log_samples", "--output_path", str(out), "--adaptive", "--bank", str(bank),
                                  "--item-field", "doc_id", "--min-items", "2", "--max-items", "3",
                                  "--redact", P["--redact"]])
    return rc, out, captured


def test_run_adaptive_writes_and_prints_no_secret(adaptive_run):
    rc, out, captured = adaptive_run
    assert rc == 0, captured.err
    names = files_text(out)
    assert any(n.endswith(".json") and "/results_" in n for n in names)
    assert any("/samples_" in n for n in names) and any(n.endswith(".png") for n in names)
    assert_no_leak(out, captured)
    # the results JSON keeps the harmless arguments and marks the removed ones
    (res,) = [t for n, t in names.items() if "/results_" in n]
    cfg = json.loads(res)["config"]["model_args"]
    assert cfg["model"] == "openai/GPT-4" and cfg["api_key"] == "***" and cfg["aws_secret_access_key"] == "***"
    assert cfg["base_url"] == "http://***@127.0.0.1:9/v1"
    assert "openai/GPT-4" in captured.out and "api_key" in captured.out  # the summary line, redacted


# ------------------------------------------------------------------------------------------ rank
@pytest.fixture(scope="module")
def rank_run(server, bank, tmp_path_factory):
    out = tmp_path_factory.mktemp("rank") / "out"
    specs = [f"{s}=litellm:{model_args('openai/' + s)}" for s in ("GPT-4", "Aya23")]
    argv = ["rank", "--models", *specs, "--model", "litellm", "--model_args", spaced_model_args("openai/NoSuchSystem"),
            "--tasks", WMT, "--bank", str(bank), "--include_path", str(REPO / "task_configs"),
            "--apply_chat_template", "--item-field", "doc_id", "--output", str(out), "--no-progress",
            "--backoff", "0", "--max-attempts", "1", "--max-failures", "1", "--min-items", "2", "--max-items", "3",
            "--price", "GPT-4=1,3", "Aya23=1,3", "openai/NoSuchSystem=1,3", "--redact", P["--redact"]]
    return _run_captured(argv), out


def test_rank_writes_and_prints_no_secret(rank_run):
    (rc, captured), out = rank_run
    assert rc == 3, captured.err  # ranked; the unknown model dropped
    names = set(files_text(out))
    assert {"run.json", "journal.jsonl", "ranking.json", "ranking.png"} <= names
    assert_no_leak(out, captured)
    report = json.loads((out / "ranking.json").read_text())
    assert [f["model"] for f in report["failed"]] == ["openai/NoSuchSystem"]  # its error text is written too
    saved = json.loads((out / "run.json").read_text())["settings"]["models"]
    assert saved[0].startswith("GPT-4=litellm:model=openai/GPT-4,api_key=***,key=***,token=***")
    # the spaced --model_args were read as arguments: the model id sent is the model's alone
    assert saved[-1].startswith("litellm:model=openai/NoSuchSystem,") and saved[-1].endswith(",api_token=***")
    # the provider's error is one line, without the library's traceback
    (err,) = [f["error"] for f in report["failed"]]
    assert "Traceback" not in err and "\n" not in err and 'File "' not in err, err


def test_the_dry_run_writes_and_prints_no_secret(server, bank, tmp_path):
    out = tmp_path / "dry"
    specs = [f"{s}=litellm:{model_args('openai/' + s)}" for s in ("GPT-4", "Aya23")]
    rc, captured = _run_captured(["rank", "--models", *specs, "--model", "litellm", "--model_args",
                                  spaced_model_args("openai/Phi-3-Medium"), "--tasks", WMT, "--bank", str(bank),
                                  "--include_path", str(REPO / "task_configs"), "--apply_chat_template",
                                  "--item-field", "doc_id", "--output", str(out), "--dry-run", "--budget-usd", "0.1",
                                  "--price", "GPT-4=1,3", "Aya23=1,3", "openai/Phi-3-Medium=1,3",
                                  "--redact", P["--redact"]])
    assert rc == 0, captured.err
    assert "cost_forecast.json" in set(files_text(out))
    assert_no_leak(out, captured)
    # the forecast is the report, on stdout (issue 30 item 7); the model named there, its secret nowhere
    assert "openai/Phi-3-Medium" in captured.out and "Phi-3-Medium api_token" not in captured.out + captured.err


def test_run_refuses_a_space_before_a_key_in_model_args(server, bank, tmp_path):
    out = tmp_path / "run"
    server.reset_stats()
    rc, captured = _run_captured(["run", "--model", "litellm", "--model_args",
                                  f"model=openai/GPT-4 api_key={P['spaced --model_args api_token=']}", "--tasks", WMT,
                                  "--include_path", str(REPO / "task_configs"), "--adaptive", "--bank", str(bank),
                                  "--item-field", "doc_id", "--output_path", str(out)])
    errors = [ln for ln in captured.err.splitlines() if ln.startswith("error:")]
    assert rc == 2 and len(errors) == 1 and "separate the arguments with commas" in errors[0], captured.err
    assert "Traceback" not in captured.err and server.stats()["requests"] == 0 and not out.exists()
    assert_no_leak(tmp_path, captured)


def test_every_credential_litellm_reads_from_the_environment_is_redacted():
    """litellm's own list: every environment variable its source reads (``get_secret*("NAME")``,
    ``os.environ.get("NAME")``, ``os.getenv``) or its providers' table names as ``api_key_env``,
    whose name has a credential word in it, is taken as a secret by name."""
    import re

    import litellm

    root = Path(litellm.__file__).parent
    pattern = re.compile(r"""(?:get_secret(?:_str)?\(\s*(?:secret_name\s*=\s*)?|os\.environ\.get\(\s*|"""
                         r"""os\.getenv\(\s*|os\.environ\[\s*)["']([A-Z][A-Z0-9_]+)["']""")
    names = {m for f in root.rglob("*.py") for m in pattern.findall(f.read_text(errors="replace"))}
    for f in root.rglob("providers.json"):
        names |= {v["api_key_env"] for v in json.loads(f.read_text()).values()
                  if isinstance(v, dict) and isinstance(v.get("api_key_env"), str)}
    assert len(names) > 300  # the scan found litellm's names
    credential = re.compile(r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|PASSWORD|PAT|CREDENTIALS?|JWT|BEARER)(?:_|$)")
    not_secret = re.compile(r"_(?:URL|URI|FILE|PATH|DIR|ENDPOINT|HOST|PORT|NAME|VERSION|TTL_SECONDS|ENABLED)$")
    wanted = {n for n in names if credential.search(n) and not not_secret.search(n)}
    assert {"OPENAI_API_KEY", "AWS_BEARER_TOKEN_BEDROCK", "AWS_SECRET_ACCESS_KEY", "AZURE_AD_TOKEN",
            "VERTEXAI_CREDENTIALS", "WATSONX_APIKEY"} <= names
    missed = sorted(n for n in wanted | {"CLARIFAI_PAT", "GITHUB_PAT", "WATSONX_APIKEY"} if not is_secret_env_name(n))
    assert not missed, missed
    for n in ("PATH", "HOME", "TOKENIZERS_PARALLELISM", "GITHUB_ACCESS_TOKEN_URL", "AZURE_FEDERATED_TOKEN_FILE",
              "LITELLM_LOCAL_MODEL_COST_MAP", "PYTHONPATH", "PWD", "OLDPWD"):
        assert not is_secret_env_name(n), n


# ------------------------------------------------------------------- leaderboard, refresh, render
@pytest.fixture(scope="module")
def board_runs(server, tmp_path_factory):
    root = tmp_path_factory.mktemp("board")
    lb = root / "lb.json"
    created = _run_captured(["leaderboard", "--history", "wmt24/en-de/bleu", "--task", WMT, "--metric", "bleu",
                             "--item-field", "id", "--models", "AIST-AIRC", "Aya23", "CUNI-NL", "--out", str(lb)])
    refreshed = _run_captured(["refresh", "--leaderboard", str(lb), "--add", f"New=litellm:{model_args('openai/GPT-4')}",
                               "--model", "litellm", "--model_args", spaced_model_args("openai/Phi-3-Medium"),
                               "--price", "New=1,3", "openai/Phi-3-Medium=1,3", "--budget-usd", "0.05",
                               "--min-items", "2", "--max-items", "3", "--include_path", str(REPO / "task_configs"),
                               "--apply_chat_template", "--no-progress", "--backoff", "0",
                               "--output", str(root / "refresh"), "--redact", P["--redact"]])
    rendered = _run_captured(["leaderboard", "render", str(lb), "--html", str(root / "lb.html"),
                              "--plot", str(root / "lb.png")])
    return root, created, refreshed, rendered


def test_leaderboard_refresh_and_render_write_and_print_no_secret(board_runs):
    root, created, refreshed, rendered = board_runs
    for rc, captured in (created, refreshed, rendered):
        assert rc == 0, captured.err
    names = set(files_text(root))
    assert {"lb.json", "lb.html", "lb.png", "refresh/run.json", "refresh/journal.jsonl"} <= names
    board = json.loads((root / "lb.json").read_text())
    assert {"New", "openai/Phi-3-Medium"} <= {e["model"] for e in board["entries"]}
    for _, captured in (created, refreshed, rendered):
        assert_no_leak(root, captured)


# ----------------------------------------------------------------------------------- errors
def test_an_error_line_echoing_a_spec_shows_no_secret(server, bank, tmp_path, capsys):
    out = tmp_path / "out"
    rc, captured = _capture(capsys, ["rank", "--models", f"A=nosuchtype:{model_args('a')}",
                                     f"B=litellm:{model_args('openai/GPT-4')}", "--tasks", WMT, "--bank", str(bank),
                                     "--include_path", str(REPO / "task_configs"), "--item-field", "doc_id",
                                     "--output", str(out), "--price", "A=1,1", "B=1,1", "--redact", P["--redact"]])
    assert rc == 2 and captured.err.startswith("error:") and "nosuchtype" in captured.err
    assert_no_leak(tmp_path, captured)


def test_a_parse_error_shows_no_redact_value(capsys):
    with pytest.raises(SystemExit):
        main(["rank", "--redact", "parse-err-secret-77", "--budget-usd", "parse-err-secret-77"])
    assert "parse-err-secret-77" not in capsys.readouterr().err


# ---------------------------------------------------------------------------- the redaction
@pytest.mark.parametrize("text, secret", [
    ("model=x,api_key=abc-123,base_url=http://h/v1", "abc-123"),
    ("model=x,key=zq9-key-value", "zq9-key-value"),
    ("model=x,token=zq9-tok", "zq9-tok"),
    ("model=x,aws_secret_access_key=wJalr/XUtnFEMI+K7MDENG,aws_region_name=us-east-1", "wJalr/XUtnFEMI+K7MDENG"),
    ("model=x,vertex_credentials=my creds with spaces,vertex_project=p", "creds with spaces"),
    ("password=pa@ss/w0rd,model=x", "pa@ss/w0rd"),
    ("base_url=http://user:pa@ss/w0rd@127.0.0.1:8123/v1", "pa@ss/w0rd"),
    ("base_url=https://user:pa@ss/w0rd@api.example.com/v1/chat", "ss/w0rd"),
    ("proxy http://ghtoken123456@proxy.example:8080/ failed", "ghtoken123456"),
    ("GET https://host.example/v1/models?alt=json&key=AIzaQQQQ&x=1", "AIzaQQQQ"),
    ("GET https://host.example/v1?access_token=tok777&x=1", "tok777"),
    ("headers {'Authorization': 'Bearer abcdefgh12345678'}", "abcdefgh12345678"),
    ("Authorization: Bearer abcdefgh12345678", "abcdefgh12345678"),
    ("{\"client_secret\": \"cs-111\", \"model\": \"m\"}", "cs-111"),
    ("litellm (model=x,my_custom_token=ct-999), adaptive: se_target=0.2", "ct-999"),
    ("error: 401 Incorrect API key provided: sk-abcdefghijklmnopqrstuvwx", "sk-abcdefghijklmnopqrstuvwx"),
    ("HF_TOKEN is hf_abcdefghijklmnopqrstuvwxyz", "hf_abcdefghijklmnopqrstuvwxyz"),
])
def test_each_form_is_removed_by_shape(text, secret):
    out = redact_text(text)
    assert secret not in out and "***" in out, out


def test_a_url_path_at_sign_and_the_host_stay():
    assert redact_text("https://host.example/@user/repo") == "https://host.example/@user/repo"
    assert redact_text("http://u:p@w@db.example:5432/x") == "http://***@db.example:5432/x"
    assert redact_text("see http://TOKEN123@localhost:8123/v1.") == "see http://***@localhost:8123/v1."


@pytest.mark.parametrize("text", [
    "gpt-4o-mini openai/GPT-4 Phi-3-Medium claude-3.5-sonnet wmt24_en-de alpaca_eval_judge",
    "θ̂ = -1.403 ± 0.419; 3 of 997 documents (0.3%); $0.0258; budget_usd=0.1 max_items=500",
    "basic arithmetic on a task-abcdefghijklmnopqrstuvwxyz0123 with max_tokens=256, tokenizer gpt2 and the "
    "password prompt 'enter key' https://example.org/a?q=1&page=2",
    "one model's arguments, key=val,key2=val2 (or key=val key2=val2); a bearer of news",
    "eos_token=</s>,add_bos_token=True,max_gen_toks=256,tokenizer_backend=None",
    "KeyError: 'doc_id' at http://127.0.0.1:8123/v1/chat/completions",
    "ranking: GPT-4 > Aya23 ≈ CUNI-NL; tie groups [['a', 'b']]",
])
def test_ordinary_text_is_left_alone(text):
    assert redact_text(text) == text


def test_by_key_at_any_depth_and_not_tokenizer_settings():
    rec = {"model_args": {"model": "m", "api_key": "k1", "aws_secret_access_key": "k2", "vertex_credentials": {"a": 1},
                          "eos_token": "</s>", "max_tokens": 5},
           "usage": {"prompt_tokens": 10}, "list": [{"x-api-key": "k3"}], "Token": 123, "apiKey": "k4"}
    out = redact(rec)
    assert out["model_args"] == {"model": "m", "api_key": "***", "aws_secret_access_key": "***",
                                 "vertex_credentials": "***", "eos_token": "</s>", "max_tokens": 5}
    assert out["usage"] == {"prompt_tokens": 10} and out["list"] == [{"x-api-key": "***"}]
    assert out["Token"] == "***" and out["apiKey"] == "***"
    assert rec["model_args"]["api_key"] == "k1"  # a copy
    assert not is_secret_key("prompt_tokens") and not is_secret_key("pad_token") and is_secret_key("HF_TOKEN")


def test_secrets_on_the_command_line_are_known_by_value():
    argv = ["--model_args", "model=x,api_key=short1,vertex_credentials=a b c d,base_url=http://u:p@ss/w@h.example/v1",
            "N=litellm:model=y,token=tk-42", '{"api_key": "json-key-1", "model": "m"}',
            "https://h.example/v1?key=qk-1234"]
    found = secrets_in(argv)
    assert {"short1", "a b c d", "u:p@ss/w", "p@ss/w", "tk-42", "json-key-1", "qk-1234"} <= set(found)
    assert not {"x", "y", "m", "litellm"} & set(found)
    with redacting(argv + ["--redact", "ab12"]):
        # by value, wherever they show, keys or not
        assert redact_text("the key short1, tk-42 and ab12 and p@ss/w") == "the key ***, *** and *** and ***"
    assert redact_text("short1 ab12") == "short1 ab12"  # the command's values are forgotten after it


def test_the_environment_is_known_by_value(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_SECRET_KEY", "env-value-12345")
    monkeypatch.setenv("CUSTOM_BASE", "http://user:envpw-999@h.example/")
    monkeypatch.setenv(REDACT_ENV, "listed-1, listed-2")
    assert redact_text("a env-value-12345 envpw-999 listed-1 listed-2 b") == "a *** *** *** *** b"
    monkeypatch.setenv("OPENAI_API_KEY", "replay")  # too short to be told from a word: left alone
    assert redact_text("replay server") == "replay server"


def test_streams_and_log_records_are_redacted(capsys, caplog):
    import io
    import sys

    buf = io.StringIO()
    s = RedactingStream(buf)
    s.write("api_key=abc-xyz-1, ok\n")
    assert buf.getvalue() == "api_key=***, ok\n"
    with redacting(["--model_args", "model=x,token=log-tok-42"]):
        print("printed log-tok-42")
        print("to stderr x=1,token=zz-77", file=sys.stderr)
        with caplog.at_level(logging.WARNING, logger="lm_eval_adaptive.test"):
            logging.getLogger("lm_eval_adaptive.test").warning("failed %s at %s", "log-tok-42",
                                                               "http://u:pw-9911@h.example/")
    captured = capsys.readouterr()
    assert "printed ***" in captured.out and "x=1,token=***" in captured.err
    assert "log-tok-42" not in caplog.text and "pw-9911" not in caplog.text and "failed *** at http://***@" in caplog.text


def test_help_text_of_every_command_is_unchanged_by_redaction():
    parser = build_parser(with_run=True)
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():
        text = p.format_help()
        assert redact_text(text) == text, name


def test_a_provider_error_is_one_line_without_the_traceback_in_its_message():
    """litellm puts the traceback of the error it wraps into its message; ``failed[].error`` and the journal
    get one line: the message before it, and the error it ended in."""
    import litellm

    from lm_eval_adaptive.errors import error_line

    e = litellm.APIConnectionError(
        message="OpenAIException - Traceback (most recent call last):\n  File \"/x/openai.py\", line 7, in f\n"
                "    raise ConnectError(url)\nhttpx.ConnectError: [Errno 111] Connection refused\n",
        llm_provider="openai", model="openai/GPT-4")
    line = error_line(e)
    assert "\n" not in line and "Traceback" not in line and 'File "' not in line, line
    assert line.startswith("APIConnectionError: ") and "OpenAIException" in line
    assert line.endswith("(httpx.ConnectError: [Errno 111] Connection refused)"), line
