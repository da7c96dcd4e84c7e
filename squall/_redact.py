"""Credentials kept out of everything squall shows: UI pages, REST JSON, ``squall info``, errors
and logs.

A credential hides two ways. By key: a key named like one (a password, token, secret, API key,
bearer token, credential, private key or JAAS configuration) is left out with its value. By value:
a string may carry one wherever it sits, as a URL's password (``redis://:pw@host``,
``postgresql://user:pw@host/db``), as ``password=pw`` in a key=value DSN or a query string, as
``"password": "pw"`` in JSON text, or as ``Bearer <token>``; that part is replaced by `MASK`.
Nested maps and lists are walked, so a credential in a map under
``topology.state.provider.config`` (or in that map given as a JSON string) is masked too.

`redact` is the one function every place that shows a configuration calls; `redact_text` is its
rule for one string (also applied to log lines by `RedactingFilter`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

MASK = "***"

# Words that name a credential inside a key (case-insensitive, anywhere in it): "squall.secret",
# "storm.zookeeper.auth.password", "redis.pwd", "x.apikey", "x.api_key", "x.bearer",
# "x.private.key", "sasl.jaas.config", "aws.credentials", "auth.token", "authorization",
# "storm.zookeeper.auth.payload" (Storm's "user:password"), "ssl.key.passphrase", and a signed
# URL's signature, which grants what a password would (S3's "X-Amz-Signature", Azure's SAS "sig").
_SECRET_KEY_RE = re.compile(
    r"secret|passw(?:or)?d|passphrase|pwd|token|credential|api[._-]?key|bearer|private[._-]?key|jaas"
    r"|authorization|auth[._-]?payload|(?:^|[._-])pass(?:$|[._-])|signature|(?:^|[._-])sig(?:$|[._-])",
    re.IGNORECASE)

# scheme://user:password@host: the password ends at the last "@" before a space or quote (an
# unescaped "@" or "/" in a password then hides more than the password, never less)
_URL_PASSWORD_RE = re.compile(r"(?P<head>\b[a-z][a-z0-9+.\-]*://[^:/@\s\"']*:)[^\s\"']*@", re.IGNORECASE)
# the runs a URL password can sit in: it ends before a space or a quote
_TOKEN_RE = re.compile(r"[^\s\"']+")
# key=value pairs (DSNs, query strings, JAAS options) and "key": value in JSON text, whose key
# names a credential; the value is quoted, or runs to a space or a separator. A bare "key: value"
# is prose as often as not ("refused our secret: check..."), so only a quoted key takes ":".
# A command line shown as a list (a shell component's, in the error and the failure its death
# gives) has a flag and its value as two items: "'--password', 'pw'" is a pair too.
# A bare key starts where a run of key characters starts (the lookbehind): tried at every
# position inside a run, the search was quadratic in the run's length, and masking a failure's
# reason or a log line holding one 200,000-character word (a base64 value in an error) took
# 450 s. A match from inside a run could only be a suffix of the run's own, which is tried first.
_PAIR_RE = re.compile(
    r"(?P<key>(?P<q>[\"'])(?P<quoted>[A-Za-z0-9_.\-]+)(?P=q)\s*[=:]\s*"
    r"|(?P<fq>[\"'])(?P<flag>--?[A-Za-z0-9_.\-]+)(?P=fq)\s*,\s*(?=[\"'])"
    r"|(?<![A-Za-z0-9_.\-])(?P<bare>[A-Za-z0-9_.\-]+)\s*=\s*)"
    r"(?P<value>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s;&,}\]\"']+)")
_BEARER_RE = re.compile(r"(?P<head>\bbearer\s+)(?P<token>[^\s\"',;]+)", re.IGNORECASE)
# Brackets that close around a credential rather than belong to it: "connect(password=pw)",
# "[Bearer t]". A run of them at a value's end is given back after the mask (masking ate it:
# "connect(password=***"); one inside a value stays hidden with it, so a password holding a ")"
# shows no more than its trailing closers. An unquoted pair value already stops at "]" and "}".
_PAIR_CLOSERS = ")>"
_BEARER_CLOSERS = ")]}>"
# What each rule above needs in a text to match at all: a text without any (most log lines)
# skips the three substitutions, which cost a log record more than formatting and writing it.
_CANDIDATE_RE = re.compile(r"://|=|[\"']|bearer", re.IGNORECASE)


def is_secret_key(key: Any) -> bool:
    """Whether a configuration key names a credential, so that its value is never shown
    (``squall.secret``, ``db.password``, ``x.apikey``, ``sasl.jaas.config``...)."""
    return _names_secret(str(key))


# Every look at a topology (get_topology_info, the UI's pages) redacts its whole configuration,
# and the case-blind search tries each word at every position of a key: about 36,000
# instructions a key, half of what a look at W1's topology cost. A topology's keys repeat from
# one look to the next.
@lru_cache(maxsize=4096)
def _names_secret(key: str) -> bool:
    return _SECRET_KEY_RE.search(key) is not None


def redact_text(text: str) -> str:
    """``text`` with every credential it carries replaced by `MASK`: URL passwords
    (``redis://u:***@host``), values of credential-named pairs (``password=***``,
    ``"apikey": "***"``) and bearer tokens. Text without one comes back unchanged."""
    if not _CANDIDATE_RE.search(text):
        return text
    if "://" in text and "@" in text:
        text = _TOKEN_RE.sub(_masked_url_passwords, text)
    # bearer tokens first: "Authorization: Bearer t" would otherwise lose only the word "Bearer"
    text = _BEARER_RE.sub(lambda m: f"{m['head']}{_masked_value(m['token'], _BEARER_CLOSERS)}", text)
    return _PAIR_RE.sub(_masked_pair, text)


def shown_text(text: str) -> str:
    """``text`` as it may leave the process (an error record, a failure's cause, the wire):
    credentials masked (`redact_text`), and a lone surrogate (half an emoji from a JSON client)
    escaped (``\\ud83d``), which no UTF-8 encoder refuses."""
    text = redact_text(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _masked_url_passwords(token: re.Match[str]) -> str:
    """One run of the text between spaces and quotes, its URL passwords masked. A password runs
    to the run's last "@", so the rule is tried on the run up to it only: over the whole text,
    each "scheme://user:" after the last "@" read the run to its end and failed, and masking a
    line of 160 KB of them took 14 s."""
    t = token[0]
    cut = t.rfind("@")
    if cut < 0 or "://" not in t:
        return t
    return _URL_PASSWORD_RE.sub(lambda m: f"{m['head']}{MASK}@", t[:cut + 1]) + t[cut + 1:]


def _masked_pair(m: re.Match[str]) -> str:
    if not is_secret_key(m["quoted"] or m["flag"] or m["bare"]):
        return m[0]
    value = m["value"]
    if value[0] in "\"'":
        return f"{m['key']}{value[0]}{MASK}{value[0]}"
    return f"{m['key']}{_masked_value(value, _PAIR_CLOSERS)}"


def _masked_value(value: str, closers: str) -> str:
    """`MASK` for an unquoted credential ``value``, followed by the closing brackets it ended
    with (a value made of closers only is all hidden)."""
    kept = value.rstrip(closers)
    if not kept:
        return MASK
    return MASK + value[len(kept):]


def redact(value: Any) -> Any:
    """A copy of ``value`` fit to show: in maps (nested too) a key `is_secret_key` names is left
    out with its value, lists and tuples become lists of redacted items, and strings pass
    through `redact_text`. Other values come back as they are."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact(v) for k, v in value.items() if not is_secret_key(k)}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


class RedactingFilter(logging.Filter):
    """A log handler's filter that passes every record with `redact_text` applied to its message
    and traceback, so that a credential in an error (a URL in an exception, say) reaches no log
    file. It drops nothing."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite ``record``'s message (its arguments merged in) and traceback text."""
        message = record.getMessage()
        shown = redact_text(message)
        if shown != message:
            record.msg, record.args = shown, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


def redact_logs(logger: logging.Logger | None = None) -> None:
    """Add a `RedactingFilter` to each handler of ``logger`` (the root logger by default) that has
    none: called by squall's daemons once their logging is set up."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
