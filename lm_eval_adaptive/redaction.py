"""Secrets never reach an output: one redaction for every file, stream and message.

A secret is found two ways:

* **by value**: strings known to be secret are replaced wherever they occur. They are the
  values :func:`secrets_in` finds on the command line (under secret-named keys of
  ``--model_args``/``--models``, URL user info, secret query parameters, ``Bearer`` tokens), the
  values of ``--redact VALUE`` and of ``LM_EVAL_ADAPTIVE_REDACT`` (comma-separated), the values of
  environment variables named like credentials (``*_API_KEY``, ``*_KEY``, ``*_TOKEN``, ``*_SECRET``,
  ``*_PASSWORD``, ``*_CREDENTIALS``, and any name with such a word or ``PAT``, ``JWT``, ``BEARER``
  in it: ``AWS_BEARER_TOKEN_BEDROCK``, ``CLARIFAI_PAT``; :func:`is_secret_env_name`; 8 characters
  or more) and the user info of URLs in any environment variable. A command registers its own for as long as it runs (:func:`redacting`).
* **by shape**: :func:`redact_text` also replaces the user info of URLs (``scheme://user:pass@host``
  and ``scheme://TOKEN@host``; the last ``@`` before the host ends it, so a password may hold ``@``
  and ``/``), ``key=value`` and ``"key": "value"`` assignments whose key is secret-named
  (:func:`is_secret_key`; an unquoted ``=`` value runs to the next ``,``, ``key=``, quote, bracket or
  line end, spaces included), secret query parameters, ``Bearer``/``Basic`` credentials and the
  usual provider key formats (``sk-...``, ``AIza...``, ``hf_...``, AWS key ids, JWTs, ...).

:func:`redact` applies both to every string of a nested structure, and replaces the whole value
under a secret-named key. :func:`redacting` wraps a command: ``sys.stdout`` and ``sys.stderr``
pass through :func:`redact_text`, and so does every log record (message and traceback).

This module is the bottom layer (standard library only), so every layer can use it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["REDACTED", "REDACT_ENV", "SECRET_ENV_WORDS", "is_secret_key", "is_secret_env_name", "redact_text",
           "redact", "secrets_in", "env_secrets",
           "known_secrets", "redact_option_values", "redacting", "RedactingStream"]

REDACTED = "***"
#: Environment variable: more values to redact, comma-separated.
REDACT_ENV = "LM_EVAL_ADAPTIVE_REDACT"

# ---------------------------------------------------------------------------- names
#: names (lower case, '-' and camelCase read as '_') whose values are secrets
_SECRET_NAMES = frozenset({
    "api_key", "apikey", "key", "token", "secret", "password", "passwd", "pwd", "authorization",
    "proxy_authorization", "auth", "credentials", "credential", "cookie", "set_cookie", "private_key",
    "client_secret", "signature", "sig", "aws_access_key_id", "vertex_credentials", "service_account",
    "service_account_json", "connection_string", "dsn",
})
_SECRET_SUFFIXES = ("_api_key", "_apikey", "_key", "_token", "_secret", "_password", "_passwd", "_pwd",
                    "_credentials", "_credential", "_auth", "_cookie", "_signature", "_key_id", "_pat")
#: ``*_token`` / ``*_key`` names that are not secrets (tokenizer settings, counts)
_NOT_SECRET = frozenset({
    "eos_token", "bos_token", "pad_token", "unk_token", "sep_token", "cls_token", "mask_token",
    "add_bos_token", "add_eos_token", "add_special_token", "stop_token", "start_token", "end_token",
    "max_token", "min_token", "skip_special_token", "sort_key", "cache_key", "primary_key", "group_key",
    "metric_key", "item_key", "doc_key", "dict_key", "task_key",
})
#: bare names that mean a secret only inside structured text (``?key=``, ``,key=``, ``(key=``):
#: in prose (``key=val``, ``the token: ...``) they are left alone
_GENERIC_NAMES = frozenset({"key", "token", "auth", "sig", "signature", "secret", "pwd", "dsn", "cookie"})
#: placeholders, not secrets (the harness's api_key=EMPTY, the replay endpoint's OPENAI_API_KEY=replay)
_NOT_SECRET_VALUES = frozenset({"", REDACTED, "true", "false", "none", "null", "empty", "dummy", "replay"})


def _norm(key: str) -> str:
    k = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(key).strip())  # camelCase → snake_case
    return k.lower().replace("-", "_").replace(".", "_").lstrip("_")


def is_secret_key(key: str) -> bool:
    """Whether values under the name ``key`` (a dict key, a ``--model_args`` key, a header, a query
    parameter) are secrets: ``api_key``, ``key``, ``token``, ``password``, ``authorization``,
    ``vertex_credentials``, any ``*_key``/``*_token``/``*_secret``/``*_password`` name such as
    ``aws_secret_access_key`` (tokenizer settings such as ``eos_token`` excepted), ..."""
    k = _norm(key)
    if not k or k in _NOT_SECRET or k.rstrip("s") in _NOT_SECRET:
        return False
    return k in _SECRET_NAMES or k.endswith(_SECRET_SUFFIXES)


# ---------------------------------------------------------------------------- shapes
_SCHEME = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://")
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])"
                   r"(?::\d{1,5})?(?=[/?#,)\]}\s\"'<>;]|$)")
_PLAIN_AUTHORITY = re.compile(r"[A-Za-z0-9._~-]*(?::\d*)?(?=[/?#]|$)")
_URL_STOP = re.compile(r"[\s\"'<>`\x1b]")


def _userinfo_end(rest: str) -> int | None:
    """Index of the ``@`` that ends the user info of the URL text ``rest`` (after ``scheme://``), or
    None when it has none. The last ``@`` before the host ends it: a password may hold ``@`` or ``/``."""
    stop = _URL_STOP.search(rest)
    run = rest[:stop.start()] if stop else rest
    if "@" not in run:
        return None
    first = re.search(r"[/?#]", run)
    authority = run[:first.start()] if first else run
    if "@" not in authority and _PLAIN_AUTHORITY.match(run):
        return None  # host[:port] then a path that happens to hold '@'
    cands = [i for i, c in enumerate(run) if c == "@" and _HOST.match(run, i + 1)]
    if not cands:
        return None
    real = [i for i in cands if re.match(r"(?:[^/?#@]*\.|localhost|\[|[^/?#@]*:\d)", run[i + 1:])]
    return (real or cands)[-1]


def _redact_urls(s: str) -> str:
    out, pos = [], 0
    for m in _SCHEME.finditer(s):
        if m.start() < pos:
            continue
        at = _userinfo_end(s[m.end():])
        if not at:
            continue
        out.append(s[pos:m.end()])
        out.append(REDACTED)
        pos = m.end() + at  # keep the '@'
    out.append(s[pos:])
    return "".join(out)


def _url_userinfo(s: str) -> list[str]:
    """The user info of every URL in ``s``, and the password part of each (its secrets by value)."""
    found = []
    for m in _SCHEME.finditer(s):
        at = _userinfo_end(s[m.end():])
        if at:
            info = s[m.end():m.end() + at]
            found.append(info)
            if ":" in info:
                found.append(info.split(":", 1)[1])
    return found


# `key = value` / `"key": "value"`: the key and its separator; the value's extent is read after it
_ASSIGN = re.compile(r"""(?<![\w.\-/])(["']?)([A-Za-z_][\w.\-]*)\1(\s*[=:]\s*)""")
_GENERIC_BEFORE = set("?&;,([{")
_EQ_VALUE_STOP = re.compile(r"""[,\n\r"'&;)\]}>\x1b]|\s+(?:--|[\w.\-]+\s*=)""")
_COLON_VALUE = re.compile(r"""(?i)(?:(?:bearer|basic|token)\s+)?[^\s"',;&)\]}>\x1b]+""")


def _value_span(s: str, start: int, sep: str) -> int:
    """End of the value that starts at ``s[start]`` after the separator ``sep``."""
    if start >= len(s):
        return start
    q = s[start]
    if q in "\"'":
        end = s.find(q, start + 1)
        return len(s) if end < 0 else end + 1
    if "=" in sep:
        m = _EQ_VALUE_STOP.search(s, start)
        end = m.start() if m else len(s)
        while end > start and s[end - 1].isspace():
            end -= 1
        return end
    m = _COLON_VALUE.match(s, start)
    return m.end() if m else start


def _redact_assignments(s: str) -> str:
    out, pos = [], 0
    for m in _ASSIGN.finditer(s):
        if m.start() < pos or not is_secret_key(m.group(2)):
            continue
        if _norm(m.group(2)) in _GENERIC_NAMES and not m.group(1):
            before = s[m.start() - 1] if m.start() > 0 else ","
            if before not in _GENERIC_BEFORE:
                continue
        if ":" in m.group(3) and s.startswith("//", m.end()):
            continue  # scheme://
        start = m.end()
        end = _value_span(s, start, m.group(3))
        value = s[start:end]
        quote = value[:1] if value[:1] in "\"'" and len(value) >= 2 and value[-1] == value[0] else ""
        inner = value[1:-1] if quote else value
        if inner.strip().lower() in _NOT_SECRET_VALUES:
            continue
        out.append(s[pos:start])
        out.append(quote + REDACTED + quote)
        pos = end
    out.append(s[pos:])
    return "".join(out)


_QUERY = re.compile(r"([?&;])([\w.\-]+)=([^&#\s\"'<>,)\x1b]*)")


def _redact_query(s: str) -> str:
    def sub(m):
        if not is_secret_key(m.group(2)) or m.group(3).lower() in _NOT_SECRET_VALUES:
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}={REDACTED}"
    return _QUERY.sub(sub, s)


_TOKEN = r"[A-Za-z0-9._~+/=-]"
_PATTERNS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"(?i)\b(bearer)\s+(?:" + _TOKEN + r"{16,}|(?=" + _TOKEN + r"*[0-9._~+/=-])" + _TOKEN + r"{6,})"),
     r"\1 " + REDACTED),
    (re.compile(r"(?i)\b(basic)\s+(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}"), r"\1 " + REDACTED),
    # provider key formats
    (re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}"), REDACTED),  # OpenAI, Anthropic, DeepSeek...
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), REDACTED),  # Google
    (re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"), REDACTED),
    (re.compile(r"(?<![A-Za-z0-9])(?:hf|gsk|r8|xai|pplx|nvapi)[_-][A-Za-z0-9_-]{20,}"), REDACTED),
    (re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])"), REDACTED),  # AWS key id
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),  # Slack
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), REDACTED),  # JWT
)


# ---------------------------------------------------------------------------- values
_SECRET_ENV = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$")
#: a word of an environment variable's name (split at ``_``) that makes its value a credential wherever
#: it stands: ``AWS_BEARER_TOKEN_BEDROCK``, ``CLARIFAI_PAT``, ``GITHUB_PAT``, ``SNOWFLAKE_JWT``,
#: ``WATSONX_APIKEY``, ``HCP_VAULT_APPROLE_SECRET_ID`` (the names provider libraries such as litellm
#: read their credentials from; tests/test_secrets.py checks every one litellm's source reads)
SECRET_ENV_WORDS = frozenset({"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PAT",
                              "CREDENTIAL", "CREDENTIALS", "JWT", "BEARER", "PASSPHRASE"})
#: a last word that makes the variable a setting about a credential, not one: ``*_TOKEN_URL``,
#: ``AZURE_FEDERATED_TOKEN_FILE``, ``CHATGPT_TOKEN_DIR``, ``OAUTH_TOKEN_INFO_ENDPOINT``
_NOT_SECRET_ENV_LAST = frozenset({"URL", "URI", "FILE", "PATH", "DIR", "ENDPOINT", "HOST", "PORT", "NAME",
                                  "NAMES", "VERSION", "TTL", "SECONDS", "ENABLED", "HEADER", "FIELD"})
_MIN_ENV_SECRET = 8  # shorter values (e.g. a dummy "replay") would redact ordinary words
_MIN_FOUND_SECRET = 4  # a value found under a secret key on the command line

_lock = threading.Lock()
_registered: list[list[str]] = []  # one list per active redacting() scope


def is_secret_env_name(name: str) -> bool:
    """Whether the environment variable ``name`` holds a credential: its name ends in ``KEY``,
    ``TOKEN``, ``SECRET``, ``PASSWORD``, ``CREDENTIALS``..., or one of its ``_``-separated words is
    one of :data:`SECRET_ENV_WORDS` (``AWS_BEARER_TOKEN_BEDROCK``, ``CLARIFAI_PAT``) and its last
    word does not make it a setting about one (``*_TOKEN_URL``, ``*_TOKEN_FILE``)."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", str(name).upper()) if w]
    if not words or words[-1] in _NOT_SECRET_ENV_LAST:
        return False
    return bool(_SECRET_ENV.search(words[-1])) or any(w in SECRET_ENV_WORDS for w in words)


def env_secrets() -> list[str]:
    """Values of credential environment variables (:func:`is_secret_env_name`; 8 characters or more),
    the user info of URLs in any environment variable, and the values of ``LM_EVAL_ADAPTIVE_REDACT``."""
    out = [v for k, v in os.environ.items() if is_secret_env_name(k) and len(v) >= _MIN_ENV_SECRET]
    for v in os.environ.values():
        if "://" in v and "@" in v:
            out += [s for s in _url_userinfo(v) if len(s) >= _MIN_FOUND_SECRET]
    out += [v.strip() for v in os.environ.get(REDACT_ENV, "").split(",") if v.strip()]
    return out


def secrets_in(values: Iterable[str] | str) -> list[str]:
    """The secret values in command-line text (each string of ``values``): values under secret-named
    keys (``api_key=...`` in ``--model_args`` or a ``TYPE:ARGS`` spec, up to the next comma; keys of a
    JSON object), URL user info and its password, secret query parameters, ``Bearer`` tokens."""
    if isinstance(values, str):
        values = [values]
    found: list[str] = []
    for text in values:
        if not isinstance(text, str) or not text:
            continue
        found += _url_userinfo(text)
        stripped = text.strip()
        if stripped.startswith("{"):
            with contextlib.suppress(ValueError):
                found += _secret_leaves(json.loads(stripped))
        for part in text.split(","):
            m = re.search(r"(?:^|[\s:;&?(])([A-Za-z_][\w.\-]*)\s*=\s*(.*)$", part, re.S)
            while m is not None:
                if is_secret_key(m.group(1)):
                    found.append(m.group(2).strip().strip("\"'"))
                    break
                m = re.search(r"(?:^|[\s:;&?(])([A-Za-z_][\w.\-]*)\s*=\s*(.*)$", m.group(2), re.S)
        found += [m.group(3) for m in _QUERY.finditer(text) if is_secret_key(m.group(2))]
        found += re.findall(r"(?i)\bbearer\s+(" + _TOKEN + r"{6,})", text)
    return [v for v in dict.fromkeys(found) if len(v) >= _MIN_FOUND_SECRET and v.lower() not in _NOT_SECRET_VALUES]


def _secret_leaves(obj, under_secret: bool = False) -> list[str]:
    if isinstance(obj, Mapping):
        return [s for k, v in obj.items() for s in _secret_leaves(v, under_secret or is_secret_key(str(k)))]
    if isinstance(obj, (list, tuple)):
        return [s for v in obj for s in _secret_leaves(v, under_secret)]
    if under_secret and obj is not None and not isinstance(obj, bool):
        return [str(obj)]
    return []


def redact_option_values(argv: Iterable[str], option: str = "--redact") -> list[str]:
    """The values of ``--redact VALUE`` / ``--redact=VALUE`` in ``argv`` (read before the parser runs,
    so that nothing, not even a parse error, shows them)."""
    argv = list(argv)
    out = []
    for i, a in enumerate(argv):
        if a == option and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif a.startswith(option + "="):
            out.append(a[len(option) + 1:])
    return [v for v in out if v]


def known_secrets(extra: Iterable[str] = ()) -> list[str]:
    """Every secret known by value now (``extra``, the active :func:`redacting` scopes', the
    environment's), longest first."""
    with _lock:
        scoped = [v for scope in _registered for v in scope]
    vals = {v for v in (*extra, *scoped, *env_secrets()) if isinstance(v, str) and v}
    return sorted(vals, key=len, reverse=True)


# ---------------------------------------------------------------------------- redaction
def redact_text(s: str, secrets: Iterable[str] = (), *, shapes: bool = True) -> str:
    """``s`` with every secret replaced by ``***``: the known values (:func:`known_secrets`, plus
    ``secrets``) and, with ``shapes``, every secret shape (module docstring)."""
    if not isinstance(s, str) or not s:
        return s
    return _redact_str(s, known_secrets(secrets), shapes)


def _redact_str(s: str, values: list[str], shapes: bool = True) -> str:
    for value in values:
        if value in s:
            s = s.replace(value, REDACTED)
    if not shapes:
        return s
    if "://" in s:
        s = _redact_urls(s)
    s = _redact_query(s)
    s = _redact_assignments(s)
    for pattern, repl in _PATTERNS:
        s = pattern.sub(repl, s)
    return s


def redact(obj: Any, secrets: Iterable[str] = (), *, by_key: bool = True, shapes: bool = True) -> Any:
    """A copy of ``obj`` (dicts, lists and tuples copied deeply; other objects as they are) with every
    string passed through :func:`redact_text` (``shapes`` as there) and, with ``by_key``, every
    non-empty value under a secret-named key (:func:`is_secret_key`, at any depth) replaced by
    ``***``. Data that are not the user's settings (documents, model outputs) take
    ``by_key=False, shapes=False``: only the secrets known by value are removed from them."""
    values = known_secrets(secrets)
    return _walk(obj, values, by_key, shapes)


def _walk(obj, values, by_key, shapes=True):
    if isinstance(obj, str):
        return _redact_str(obj, values, shapes) if obj else obj
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            key = _redact_str(k, values, shapes) if isinstance(k, str) and k else k
            if by_key and isinstance(k, str) and is_secret_key(k) and v is not None \
                    and not isinstance(v, bool) and v != "":
                out[key] = REDACTED
            else:
                out[key] = _walk(v, values, by_key, shapes)
        return out
    if isinstance(obj, list):
        return [_walk(v, values, by_key, shapes) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_walk(v, values, by_key, shapes) for v in obj)
    return obj


# ---------------------------------------------------------------------------- streams and logs
class RedactingStream:
    """A text stream that writes everything through :func:`redact_text` (other attributes are the
    wrapped stream's)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, s):
        self._stream.write(redact_text(s) if isinstance(s, str) else s)
        return len(s)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


_factory_installed = False


def _install_log_redaction() -> None:
    """Every log record made from now on has its message (and traceback) redacted."""
    global _factory_installed
    with _lock:
        if _factory_installed:
            return
        _factory_installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args, **kwargs):
        record = previous(*args, **kwargs)
        try:
            msg = record.getMessage()
        except Exception:  # a malformed log call: leave it to logging's own error report
            return record
        record.msg, record.args = redact_text(msg), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        return record

    logging.setLogRecordFactory(factory)


def _install_excepthook() -> None:
    hook = sys.excepthook
    if getattr(hook, "_lm_eval_adaptive_redacts", False):
        return

    def redacting_hook(tp, value, tb):
        import traceback

        text = "".join(traceback.format_exception(tp, value, tb))
        sys.stderr.write(redact_text(text, secrets_in(sys.argv[1:]) + redact_option_values(sys.argv)))

    redacting_hook._lm_eval_adaptive_redacts = True
    sys.excepthook = redacting_hook


@contextlib.contextmanager
def redacting(argv: Iterable[str] = ()) -> Iterator[list[str]]:
    """Run a command with nothing secret in its output: the secrets of its command line ``argv``
    (:func:`secrets_in`, ``--redact`` values) are known by value while it runs; ``sys.stdout`` and
    ``sys.stderr`` write through :func:`redact_text`; so does every log record and an uncaught
    exception's traceback. Yields the values registered."""
    argv = [a for a in argv if isinstance(a, str)]
    scope = list(dict.fromkeys([*redact_option_values(argv), *secrets_in(argv)]))
    with _lock:
        _registered.append(scope)
    _install_log_redaction()
    _install_excepthook()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    try:
        yield scope
    finally:
        # flush before the values are forgotten (a buffered write is redacted as it is written)
        sys.stdout, sys.stderr = saved
        with _lock:
            _registered.remove(scope)
