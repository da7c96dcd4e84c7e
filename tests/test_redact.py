"""`squall._redact`: credentials masked by key name and by value (a URL's or a DSN's password,
API keys, bearer tokens, private keys, JAAS), in nested maps and lists, and in log lines
(issue 33, item 6)."""

import logging

import pytest

from squall._config import InvalidTopologyException, shown_configuration, validate
from squall._redact import MASK, RedactingFilter, is_secret_key, redact, redact_text

PW = "hunter2-Pw"

TEXT_CASES = [
    # URLs: the password goes, the user, host, port, path and query stay
    (f"redis://:{PW}@db:6379/0", "redis://:***@db:6379/0"),
    (f"rediss://ann:{PW}@db/1?ssl=1", "rediss://ann:***@db/1?ssl=1"),
    (f"postgresql://app:{PW}@db.example.com:5432/clicks?sslmode=require",
     "postgresql://app:***@db.example.com:5432/clicks?sslmode=require"),
    (f"amqp://guest:{PW}@mq/vhost then more", "amqp://guest:***@mq/vhost then more"),
    # an unescaped "@" or "/" in the password: more is hidden, never less
    (f"redis://u:{PW}@x/y@db:6379", "redis://u:***@db:6379"),
    # key=value DSNs (libpq, ODBC) and query strings
    (f"host=db user=app password={PW} dbname=clicks", "host=db user=app password=*** dbname=clicks"),
    (f"host=db password='{PW} with space' port=5432", "host=db password='***' port=5432"),
    (f"Server=db;Uid=app;Pwd={PW};Database=clicks", "Server=db;Uid=app;Pwd=***;Database=clicks"),
    (f"https://api.example.com/v1?api_key={PW}&page=2", "https://api.example.com/v1?api_key=***&page=2"),
    (f"https://h/x?access_token={PW}", "https://h/x?access_token=***"),
    # JSON text (a provider config given as a string, as Storm allows)
    (f'{{"url": "redis://:{PW}@db:6379/0", "password": "{PW}"}}',
     '{"url": "redis://:***@db:6379/0", "password": "***"}'),
    # JAAS options and bearer tokens
    (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="{PW}";',
     'org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="***";'),
    (f"Authorization: Bearer {PW}", "Authorization: Bearer ***"),
    # prose: a bare "key: value" is no pair (only a quoted key takes ":")
    ("the master refused our secret: check squall.secret", "the master refused our secret: check squall.secret"),
    (f"bearer {PW}", "bearer ***"),
    (f"connect failed: user=bob pass={PW} host=db", "connect failed: user=bob pass=*** host=db"),
    # a command line shown as a list: a flag naming a credential, then its value
    (f"subprocess ['node', 'bolt.js', '--api-key', '{PW}', '-v'] (pid 4127): it exited",
     "subprocess ['node', 'bolt.js', '--api-key', '***', '-v'] (pid 4127): it exited"),
    (f'["tool", "--password", "{PW}"]', '["tool", "--password", "***"]'),
    # a signed URL's signature (S3 presigned, Azure SAS), which grants what a password would
    (f"cannot write s3://b/t?X-Amz-Date=20261205&X-Amz-Signature={PW}",
     "cannot write s3://b/t?X-Amz-Date=20261205&X-Amz-Signature=***"),
    (f"abfss://c@acct.dfs.core.windows.net/t?sv=2022-11-02&sig={PW}",
     "abfss://c@acct.dfs.core.windows.net/t?sv=2022-11-02&sig=***"),
    # nothing to hide: unchanged
    ("has no key field 'user' (has ['name', 'password', 'email'])",
     "has no key field 'user' (has ['name', 'password', 'email'])"),
    ("['tool', '--verbose', 'on']", "['tool', '--verbose', 'on']"),
    ("field assignment=3 design=4", "field assignment=3 design=4"),
    ("redis://db:6379/0", "redis://db:6379/0"),
    ("http://host:8080/path", "http://host:8080/path"),
    ("user=app dbname=clicks", "user=app dbname=clicks"),
    ("squall.state:InMemoryKeyValueStateProvider", "squall.state:InMemoryKeyValueStateProvider"),
]


@pytest.mark.parametrize("text, shown", TEXT_CASES)
def test_a_credential_in_a_string_is_masked_and_nothing_else(text, shown):
    assert redact_text(text) == shown
    assert redact_text(shown) == shown  # masking twice changes nothing


@pytest.mark.parametrize("key", ["squall.secret", "storm.zookeeper.auth.password", "redis.PASSWORD", "db.passwd",
                                 "odbc.pwd", "auth.token", "aws.credentials", "x.apikey", "x.api_key",
                                 "x.api.key", "x.bearer", "tls.private.key", "tls.private_key", "ssh.privatekey",
                                 "sasl.jaas.config", "java.security.auth.login.config.jaas", "http.authorization",
                                 # Storm's ZooKeeper digest "user:password"s, a TLS key's passphrase, a bare pass
                                 "storm.zookeeper.auth.payload", "storm.zookeeper.topology.auth.payload",
                                 "ssl.key.passphrase", "db.pass", "pass"])
def test_keys_naming_a_credential_are_secret(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["redis.url", "db.dsn", "topology.state.provider.config", "ui.port",
                                 "topology.max.spout.pending", "nimbus.seeds", "topology.kryo.register",
                                 "storm.zookeeper.auth.user", "x.key.field", "topology.bypass.cache", "passes",
                                 "storm.zookeeper.auth.scheme"])
def test_other_keys_are_not(key):
    assert not is_secret_key(key)


def test_nested_maps_and_lists_are_walked_keys_dropped_values_masked():
    conf = {
        "redis.url": f"redis://:{PW}@db:6379/0",
        "db.dsn": f"host=db password={PW}",
        "x.apikey": PW, "x.bearer": PW, "tls.private.key": PW, "sasl.jaas.config": PW,
        "topology.state.provider.config": {"url": f"redis://u:{PW}@db/0", "timeout": 5,
                                           "auth": {"password": PW, "user": "u"}},
        "topology.metrics.consumer.register": [
            {"class": "C", "argument": {"endpoint": f"https://u:{PW}@m/", "token": PW}},
            (f"postgres://u:{PW}@h/db", 3)],
        "ui.port": 8080,
    }
    shown = redact(conf)
    assert shown == {
        "redis.url": "redis://:***@db:6379/0",
        "db.dsn": "host=db password=***",
        "topology.state.provider.config": {"url": "redis://u:***@db/0", "timeout": 5, "auth": {"user": "u"}},
        "topology.metrics.consumer.register": [
            {"class": "C", "argument": {"endpoint": "https://u:***@m/"}},
            ["postgres://u:***@h/db", 3]],
        "ui.port": 8080,
    }
    assert PW not in repr(shown)
    assert conf["redis.url"].endswith("@db:6379/0") and PW in conf["redis.url"]  # the input is not touched
    assert list(shown_configuration(conf)) == sorted(shown)


def test_a_bad_value_named_in_an_error_is_masked():
    with pytest.raises(InvalidTopologyException) as e:
        validate({"topology.state.provider.config": [f"redis://:{PW}@db/0"]}, where="topology t")
    assert "topology.state.provider.config" in str(e.value) and MASK in str(e.value)
    assert PW not in str(e.value)


def test_log_records_are_masked_in_their_message_arguments_and_traceback():
    lines = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(self.format(record))

    handler = Keep()
    handler.addFilter(RedactingFilter())
    log = logging.getLogger("test_redact")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("connecting to %s with %r", f"redis://:{PW}@db/0", {"password": PW, "host": "db"})
        try:
            raise ConnectionError(f"cannot reach postgresql://app:{PW}@db/clicks")
        except ConnectionError:
            log.exception("sink failed")
        log.warning("nothing secret: %d tuples", 5)
    finally:
        log.removeHandler(handler)
    assert len(lines) == 3
    assert "redis://:***@db/0" in lines[0] and "'password': '***'" in lines[0]
    assert "postgresql://app:***@db/clicks" in lines[1] and "Traceback" in lines[1]
    assert lines[2] == "nothing secret: 5 tuples"
    assert all(PW not in line for line in lines)


def test_an_error_record_masks_a_credential_in_its_message_and_traceback():
    # a user's exception naming its store's URL reaches the UI's errors list, the REST JSON and
    # squall info through ErrorRecord, from a worker's report (from_dict) as from LocalCluster
    from squall.engine.executor import ErrorRecord, error_record
    try:
        raise ConnectionError(f"cannot reach redis://app:{PW}@db:6379/0")
    except ConnectionError as e:
        made = error_record("store", 3, e)
    reported = ErrorRecord.from_dict({"component": "store", "task": 3, "time": 1.0,
                                      "error": f"db password={PW}", "traceback": f"x\nredis://:{PW}@db\n"})
    for record in (made, reported):
        assert PW not in record.error and PW not in record.traceback, record
        assert MASK in record.error and MASK in record.traceback
    assert made.error == f"ConnectionError: cannot reach redis://app:{MASK}@db:6379/0"


def test_text_with_nothing_a_rule_needs_skips_the_rules_unchanged():
    """The log filter runs on every record: a line without "://", "=", a quote or "bearer" cannot
    carry a credential by value, and comes back as it is (the same object, no substitution run)."""
    line = "worker 6700 processed tuple 12345 of component split in 3 ms"
    assert redact_text(line) is line
    for carrying in ("see redis://u:pw@h:6379", "password=pw", '{"token": "t"}', "BEARER abc"):
        assert MASK in redact_text(carrying)


def test_text_that_leaves_the_process_has_no_lone_surrogate():
    """A bolt's exception naming a truncated emoji (json.loads('"\\ud83d"')) crashed the DRPC
    spout's worker when its failure went on the wire, and the worker's heartbeat with its error
    record: msgpack, like every UTF-8 encoder, refuses a lone surrogate."""
    import msgpack

    from squall._failure import EXCEPTION, FailureCause
    from squall._redact import shown_text
    from squall.engine.executor import ErrorRecord
    lone = "no such user: \ud83d and password=hunter2"
    assert shown_text(lone) == "no such user: \\ud83d and password=***"
    assert shown_text("plain") == "plain"
    cause = FailureCause.of_exception(EXCEPTION, "lookup", 3, ValueError(lone))
    record = ErrorRecord("lookup", 3, 1.0, lone, f"Traceback\n  {lone}")
    msgpack.packb([tuple(cause), record.as_dict()])
    assert "\\ud83d" in cause.message and "\\ud83d" in record.error and "\\ud83d" in record.traceback


@pytest.mark.timeout(20)
def test_masking_a_long_word_reads_it_once():
    """A bare ``key=`` was tried at every position of a run of key characters, each try reading
    the run to its end: masking a text with one 200,000-character word (a base64 value quoted in
    an error, with a quote or an "=" elsewhere) took 450 s, on the thread of the bolt whose
    failure's reason or log line it was (a million characters: hours). Now a key is tried where
    a run starts: this masks 2 MB in well under a second, finding the credential after it."""
    word = "A" * 1_000_000
    for text in (f"bad value '{word}' password={PW}", f"x={word}{word} then token={PW}"):
        shown = redact_text(text)
        assert PW not in shown and shown.endswith("=***"), shown[-40:]
        assert len(shown) == len(text) - len(PW) + len(MASK)
    # a key inside a word is still found from the word's start, as before
    assert redact_text(f"url/xpassword={PW}&a-b.token={PW}") == "url/xpassword=***&a-b.token=***"


@pytest.mark.timeout(60)
def test_masking_many_url_heads_without_a_password_reads_the_line_once():
    """Each "scheme://user:" after a run's last "@" read the run to its end and failed: a log
    line of 360 KB of them (hostile input quoted in an error) took about 90 s to mask on the code
    before (22 s for 180 KB), tens of milliseconds now. A URL password in the same line is
    still masked, and the rest kept."""
    heads = "s://u:" * 60_000
    text = f"{heads} redis://:{PW}@host and x@{heads[:600]}"
    shown = redact_text(text)
    assert PW not in shown and shown == f"{heads} redis://:***@host and x@{heads[:600]}"
    # the rule is the same per run: a password runs to the run's last "@"
    assert redact_text("postgresql://u:p@ss@db/x y://a:b@c") == "postgresql://u:***@db/x y://a:***@c"


# A credential followed by what closes around it: the mask replaced the closing ")" too
# ("connect(password=***"), and a bearer token's ")", "]" and "}". Each closer, after a bare,
# a single-quoted and a double-quoted value, a JSON pair, a flag's value and a bearer token.
CLOSER_CASES = [
    (f"connect(password={PW})", "connect(password=***)"),
    (f"Config(token={PW}), then", "Config(token=***), then"),
    (f"f(g(secret={PW}))", "f(g(secret=***))"),
    (f"[password={PW}]", "[password=***]"),
    (f"{{password={PW}}}", "{password=***}"),
    (f"password={PW}, next", "password=***, next"),
    (f"'password={PW}'", "'password=***'"),
    (f'"password={PW}"', '"password=***"'),
    (f"<Conn password={PW}>", "<Conn password=***>"),
    (f"password={PW}", "password=***"),
    (f"dict(password='{PW}')", "dict(password='***')"),
    (f'dict(password="{PW}")', 'dict(password="***")'),
    (f"connect(password='{PW}'), next", "connect(password='***'), next"),
    (f"['password={PW}']", "['password=***']"),
    (f'("password": "{PW}")', '("password": "***")'),
    (f"{{'password': '{PW}'}}", "{'password': '***'}"),
    (f'{{"password": {PW}}}', '{"password": ***}'),
    (f"run('--password', '{PW}')", "run('--password', '***')"),
    (f"auth(Bearer {PW})", "auth(Bearer ***)"),
    (f"[Bearer {PW}]", "[Bearer ***]"),
    (f"{{Bearer {PW}}}", "{Bearer ***}"),
    (f"Bearer {PW}, retry", "Bearer ***, retry"),
    (f"'Bearer {PW}'", "'Bearer ***'"),
    (f'"Bearer {PW}"', '"Bearer ***"'),
    (f"Bearer {PW}", "Bearer ***"),
    (f"redis(redis://:{PW}@db:6379)", "redis(redis://:***@db:6379)"),
]


@pytest.mark.parametrize("text, shown", CLOSER_CASES)
def test_a_credential_followed_by_a_closer_keeps_the_closer(text, shown):
    assert redact_text(text) == shown
    assert PW not in redact_text(text)
    assert redact_text(shown) == shown


def test_a_closer_inside_a_credential_stays_hidden_with_it():
    """Only the closers a value ends with are given back: a ")" inside a password hides with
    it (the rest of it is never shown), and a value of closers only is all hidden."""
    assert redact_text("f(password=ab)cd)") == "f(password=***)"
    assert redact_text("password=ab)cd end") == "password=*** end"
    assert redact_text("password=)) end") == "password=*** end"
    assert redact_text("auth(Bearer t0k]en)") == "auth(Bearer ***)"
