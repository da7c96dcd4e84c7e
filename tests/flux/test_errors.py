"""Each mistake in a Flux file is one error naming the file, the line and the key at fault."""

from __future__ import annotations

import pytest

from squall import flux
from squall.flux import FluxError

BASE = """\
name: "t"
components:
  - id: "sentences"
    className: "flux_words.Sentences"
    constructorArgs: [["a b"]]
spouts:
  - id: "spout"
    className: "flux_words.SentenceSpout"
    constructorArgs: [{reflist: ["sentences"]}, "errors"]
bolts:
  - id: "count"
    className: "flux_words.WordCounter"
    constructorArgs: ["errors"]
streams:
  - from: "spout"
    to: "count"
    grouping: {type: SHUFFLE}
"""

BOLT_ARGS = '    constructorArgs: ["errors"]\n'
STREAM = "    grouping: {type: SHUFFLE}\n"

CASES = {
    "unknown class": (('"flux_words.WordCounter"', '"flux_words.NoSuchCounter"'),
                      ("t.yaml:12: bolts[0].className: 'count': unknown class 'flux_words.NoSuchCounter': "
                      "flux_words has no 'NoSuchCounter'")),
    "unknown module": (('"flux_words.WordCounter"', '"no_such_module.Counter"'),
                       ("t.yaml:12: bolts[0].className: 'count': unknown class 'no_such_module.Counter': "
                       "no module 'no_such_module' on sys.path")),
    "a java class": (('"flux_words.WordCounter"', '"org.apache.storm.flux.examples.WordCounter"'),
                     ("t.yaml:12: bolts[0].className: 'count': unknown class 'org.apache.storm.flux.examples.WordCounter': "
                     "no module 'org' on sys.path (a Java class: in squall, className is a Python module.Class")),
    "missing ref": (('{reflist: ["sentences"]}', '{ref: "nothing"}'),
                    ("t.yaml:9: spouts[0].constructorArgs[0].ref: no component 'nothing' declared above "
                    "(components declared: sentences)")),
    "missing ref in a reflist": (('["sentences"]', '["sentences", "evening"]'),
                                 "t.yaml:9: spouts[0].constructorArgs[0].reflist: no component 'evening'"),
    "bad grouping type": (("type: SHUFFLE", "type: SHUFLE"),
                          ("t.yaml:17: streams[0].grouping.type: unknown grouping type 'SHUFLE' (expected one of: "
                          "ALL, CUSTOM, DIRECT, SHUFFLE, LOCAL_OR_SHUFFLE, FIELDS, GLOBAL, NONE)")),
    "missing className": (('    className: "flux_words.WordCounter"\n', ""),
                          "t.yaml:11: bolts[0]: 'count': missing required key 'className'"),
    "missing from": (('  - from: "spout"\n    to:', "  - to:"), "t.yaml:15: streams[0]: missing required key 'from'"),
    "missing grouping": (("    grouping: {type: SHUFFLE}\n", ""), "t.yaml:15: streams[0]: missing required key 'grouping'"),
    "unknown key": ((BOLT_ARGS, BOLT_ARGS + "    parallelizm: 2\n"),
                    "t.yaml:14: bolts[0].parallelizm: 'count': unknown key (expected one of: className, "),
    "bad parallelism": ((BOLT_ARGS, BOLT_ARGS + "    parallelism: 0\n"),
                        "t.yaml:14: bolts[0].parallelism: 'count': expected an integer of at least 1, got 0"),
    "fields without args": (("type: SHUFFLE", "type: FIELDS"),
                            "t.yaml:17: streams[0].grouping.type: a FIELDS grouping needs args"),
    "fields not declared": (("{type: SHUFFLE}", '{type: FIELDS, args: ["nope"]}'),
                            ("t.yaml:15: streams[0]: the topology is not valid: Component: [count] subscribes from "
                            "stream: [default] of component [spout] with non-existent fields: ['nope']")),
    "direct on a plain stream": (("type: SHUFFLE", "type: DIRECT"),
                                 "t.yaml:15: streams[0]: the topology is not valid: "),
    "custom without class": (("type: SHUFFLE", "type: CUSTOM"),
                             "t.yaml:17: streams[0].grouping.type: a CUSTOM grouping needs customClass"),
    "custom not a grouping": (("{type: SHUFFLE}", ('{type: CUSTOM, customClass: {className: "flux_words.StopWords", '
                                                  'constructorArgs: [[]]}}')),
                              ("t.yaml:17: streams[0].grouping.customClass.className: flux_words.StopWords is no "
                              "squall.CustomStreamGrouping (got a StopWords)")),
    "stream to no bolt": (('to: "count"', 'to: "counter"'),
                          "t.yaml:16: streams[0].to: stream goes to 'counter', which is no bolt of this file"),
    "stream to a spout": (('to: "count"', 'to: "spout"'),
                          "t.yaml:16: streams[0].to: stream goes to 'spout', which is a spout (streams go to bolts)"),
    "stream from nothing": (('from: "spout"', 'from: "spot"'),
                            "t.yaml:15: streams[0].from: stream is from 'spot', which is no spout or bolt of this file"),
    "constructor arguments": ((BOLT_ARGS, '    constructorArgs: ["errors", 2]\n'),
                              ("t.yaml:13: bolts[0].constructorArgs: 'count': flux_words.WordCounter(sink) cannot take the 2 "
                              "argument(s) ['errors', 2]")),
    "a squall class's constructor arguments": (
        ('"flux_words.WordCounter"\n' + BOLT_ARGS, '"squall.external.files.FileSinkBolt"\n    constructorArgs: ["out", 5]\n'),
        ("t.yaml:13: bolts[0].constructorArgs: 'count': squall.external.files.FileSinkBolt(directory, *, prefix=..., "
         "suffix=..., formatter=..., max_records=..., max_bytes=..., tick_secs=...) cannot take the 2 argument(s) "
         "['out', 5]: too many positional arguments")),
    "no such config method": ((BOLT_ARGS, BOLT_ARGS + '    configMethods:\n      - name: "withNothing"\n'),
                              ("t.yaml:15: bolts[0].configMethods[0].name: 'count': WordCounter has no method 'withNothing' "
                              "(nor 'with_nothing')")),
    "no such property": ((BOLT_ARGS, BOLT_ARGS + '    properties:\n      - {name: "colour", value: 1}\n'),
                         "t.yaml:15: bolts[0].properties[0].name: 'count': WordCounter has no property 'colour'"),
    "property value and ref": ((BOLT_ARGS, BOLT_ARGS + '    properties:\n      - {name: "sink", value: 1, ref: "x"}\n'),
                               "t.yaml:15: bolts[0].properties[0]: 'count': property 'sink' needs a value or a ref"),
    "no factory": (('    constructorArgs: [["a b"]]\n', '    factory: "make"\n'),
                   "t.yaml:4: components[0].className: 'sentences': flux_words.Sentences has no factory method 'make'"),
    "a bolt as a spout": (('"flux_words.SentenceSpout"', '"flux_words.WordCounter"'),
                          "t.yaml:9: spouts[0].constructorArgs: 'spout': flux_words.WordCounter(sink) cannot take the 2"),
    "not a spout": (('"flux_words.SentenceSpout"\n    constructorArgs: [{reflist: ["sentences"]}, "errors"]',
                     '"flux_words.WordCounter"\n    constructorArgs: ["errors"]'),
                    "t.yaml:8: spouts[0].className: Component [spout]: set_spout needs a Spout, got WordCounter"),
    "bad config value": (('name: "t"\n', 'name: "t"\nconfig:\n  topology.workers: -1\n'),
                         ("t.yaml:3: config.topology.workers: config: 'topology.workers' must be a positive integer, "
                         "got -1")),
    "duplicate id": ((BOLT_ARGS, BOLT_ARGS + '  - id: "count"\n    className: "flux_words.WordCounter"\n'),
                     "t.yaml:15: bolts[1].className: id 'count' is declared twice in this section"),
    "worker hooks": (('name: "t"\n', 'name: "t"\nworkerHooks:\n  - {id: "h", className: "x.Y"}\n'),
                     "t.yaml:2: workerHooks: worker hooks are not supported by squall"),
    "topology source beside spouts": (('name: "t"\n', 'name: "t"\ntopologySource:\n  className: "x.Y"\n'),
                                      ("t.yaml:8: spouts: a topologySource and spouts, bolts or streams cannot be "
                                      "in the same file")),
    "not yaml": (("    grouping: {type: SHUFFLE}\n", "    grouping: {type: SHUFFLE\n"),
                 "t.yaml:18: not valid YAML: expected ',' or '}', but got '<stream end>'"),
    "no spouts": ((('spouts:\n  - id: "spout"\n    className: "flux_words.SentenceSpout"\n'
                   '    constructorArgs: [{reflist: ["sentences"]}, "errors"]\n'), ""),
                  "t.yaml:1: spouts: no spouts: a Flux file needs spouts, bolts and streams, or a topologySource"),
    "bad component config value": ((BOLT_ARGS, BOLT_ARGS + '    config:\n      topology.max.spout.pending: "ten"\n'),
                                   ("t.yaml:15: bolts[0].config.topology.max.spout.pending: count's config: "
                                    "'topology.max.spout.pending' must be a positive integer")),
    "an unknown tag": ((BOLT_ARGS, BOLT_ARGS + '    config:\n      my.key: !!python/name:os.system\n'),
                       "t.yaml:15: bolts[0].config.my.key: 'count': cannot read the value: could not determine a constructor"),
    "a key given twice": ((BOLT_ARGS, BOLT_ARGS + "    parallelism: 2\n    parallelism: 3\n"),
                          "t.yaml:15: bolts[0].parallelism: 'count': given twice"),
    "a second stream between the same two lacks its stream": (
        (STREAM, STREAM + '  - from: "spout"\n    to: "count"\n    grouping: {type: SHUFFLE, streamId: "nope"}\n'),
        ("t.yaml:18: streams[1]: the topology is not valid: Component: [count] subscribes from non-existent "
         "stream: [nope] of component [spout]")),
    "a stream subscribed twice": (
        (STREAM, STREAM + '  - from: "spout"\n    to: "count"\n    grouping: {type: ALL, streamId: "default"}\n'),
        ("t.yaml:18: streams[1]: stream subscribes 'count' to stream 'default' of 'spout', as streams[0] "
         "(line 15) does already: a bolt takes a stream once")),
    "include not found": (('name: "t"\n', 'name: "t"\nincludes:\n  - file: "missing.yaml"\n'),
                          "t.yaml:3: includes[0].file: file not found: 'missing.yaml'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_mistake_names_the_file_line_and_key(case, tmp_path):
    (old, new), expected = CASES[case]
    assert old in BASE
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace(old, new, 1))

    with pytest.raises(FluxError) as e:
        flux.load(path)

    assert str(e.value).startswith(expected), str(e.value)


def test_the_base_file_of_the_error_cases_builds(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(BASE)
    assert sorted(flux.load(path).topology.components) == ["count", "spout"]


def test_an_undefined_environment_variable_names_the_line_key_and_reference(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace('"errors"]', '"${ENV-FLUX_NO_SUCH_VAR}"]', 1))

    with pytest.raises(FluxError) as e:
        flux.load(path, env_filter=True, environ={"OTHER": "x"})

    assert str(e.value) == ("t.yaml:9: spouts[0].constructorArgs[1]: ${ENV-FLUX_NO_SUCH_VAR}: "
                            "environment variable FLUX_NO_SUCH_VAR is not set")
    with pytest.raises(FluxError, match=r"t.yaml:9: .*: environment substitution is off: give -e/--env-filter"):
        flux.load(path)


def test_an_error_masks_the_password_of_a_url_the_environment_gave(tmp_path):
    """The arguments a constructor could not take are shown, a Redis URL from ``${ENV-...}``
    among them: its password is masked, as in every error squall shows."""
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace('"errors"]', '"errors", "${ENV-FLUX_URL}"]', 1))

    with pytest.raises(FluxError) as e:
        flux.load(path, env_filter=True, environ={"FLUX_URL": "redis://:hunter2@127.0.0.1:6379/0"})

    assert str(e.value).startswith("t.yaml:9: spouts[0].constructorArgs: 'spout': flux_words.SentenceSpout"), str(e.value)
    assert "hunter2" not in str(e.value) and "redis://:***@127.0.0.1:6379/0" in str(e.value), str(e.value)


def test_of_several_references_on_a_line_the_error_names_the_key_of_the_undefined_one(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace('[{reflist: ["sentences"]}, "errors"]', '["${ENV-FLUX_SENTENCE}", "${ENV-FLUX_SINK}"]'))

    with pytest.raises(FluxError) as e:
        flux.load(path, env_filter=True, environ={"FLUX_SINK": "errors"})

    assert str(e.value) == ("t.yaml:9: spouts[0].constructorArgs[0]: ${ENV-FLUX_SENTENCE}: "
                            "environment variable FLUX_SENTENCE is not set")


def test_an_undefined_property_names_the_line_and_what_is_missing(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace("type: SHUFFLE", "type: ${grouping}", 1))
    (tmp_path / "p.properties").write_text("other = 1\n")

    with pytest.raises(FluxError, match=r"^t.yaml:17: streams\[0\].grouping.type: \$\{grouping\}: no properties file "
                                         r"to replace it from: give --filter FILE$"):
        flux.load(path)
    with pytest.raises(FluxError, match=r"^t.yaml:17: streams\[0\].grouping.type: \$\{grouping\}: 'grouping' is not "
                                         r"defined in the properties file$"):
        flux.load(path, filter_file=tmp_path / "p.properties")
    with pytest.raises(FluxError, match=r"missing.properties: cannot read the properties file \(--filter\)"):
        flux.load(path, filter_file=tmp_path / "missing.properties")


def test_an_error_in_an_included_file_names_that_file(tmp_path):
    (tmp_path / "inc.yaml").write_text('config:\n  topology.workers: 1\nbolts:\n  - id: "x"\n')
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace('name: "t"\n', 'name: "t"\nincludes:\n  - file: "inc.yaml"\n'))

    with pytest.raises(FluxError, match=r"^inc.yaml:4: bolts\[0\]: 'x': missing required key 'className'$"):
        flux.load(path)


def test_a_file_that_includes_itself_is_refused(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace('name: "t"\n', 'name: "t"\nincludes:\n  - file: "t.yaml"\n'))

    with pytest.raises(FluxError, match=r"^t.yaml:3: includes\[0\].file: 't.yaml' is this file itself"):
        flux.load(path)


def test_a_constructor_that_raises_is_named_with_its_exception(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace('[["a b"]]', '[5]'))

    with pytest.raises(FluxError, match=r"^t.yaml:5: components\[0\].constructorArgs: 'sentences': flux_words.Sentences\(...\) "
                                         r"raised TypeError: 'int' object is not iterable$"):
        flux.load(path)


def test_yaml_merge_keys_are_read_as_flux_reads_them(tmp_path):
    """SnakeYAML resolves ``<<: *anchor`` for Flux: a key written in the mapping wins over a
    merged one, in a bolt's definition and in ``config`` alike."""
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace('name: "t"\n', 'name: "t"\nconfig:\n  <<: {topology.workers: 1, my.key: 1}\n'
                                 '  my.key: 2\n')
                    + '  - from: "spout"\n    to: "count2"\n    grouping: {type: SHUFFLE}\n')
    text = path.read_text().replace('  - id: "count"\n', '  - &counter\n    id: "count"\n    parallelism: 3\n')
    path.write_text(text.replace("streams:\n", '  - <<: *counter\n    id: "count2"\n    numTasks: 4\nstreams:\n'))

    loaded = flux.load(path)

    assert loaded.conf == {"topology.workers": 1, "my.key": 2}
    count2 = loaded.topology.components["count2"]
    assert (count2.parallelism, count2.conf["topology.tasks"]) == (3, 4)
    assert loaded.topology.components["count"].parallelism == 3


def test_a_flux_file_that_is_not_utf8_is_named_with_its_line(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_bytes(BASE.replace('name: "t"\n', 'name: "t"\n# auteur: René\n').encode("latin-1"))

    with pytest.raises(FluxError, match=r"^t.yaml:2: not UTF-8: byte 0xe9"):
        flux.load(path)


def test_a_properties_file_in_latin1_is_read_as_java_reads_it(tmp_path):
    """``Properties.load(InputStream)`` reads ISO-8859-1; a UTF-8 file is read as UTF-8."""
    (tmp_path / "latin.properties").write_bytes("greeting=café\n".encode("latin-1"))
    (tmp_path / "utf8.properties").write_bytes("greeting=café\n".encode("utf-8"))
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace('name: "t"\n', 'name: "t"\nconfig:\n  my.greeting: "${greeting}"\n'))

    for name in ("latin.properties", "utf8.properties"):
        assert flux.load(path, filter_file=tmp_path / name).conf["my.greeting"] == "café"


def test_a_missing_dependency_of_a_class_module_is_named(tmp_path, monkeypatch):
    (tmp_path / "fluxdep_tools.py").write_text("import fluxdep\n\nclass Counter: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace('"flux_words.WordCounter"', '"fluxdep_tools.Counter"'))

    with pytest.raises(FluxError, match=r"^t.yaml:12: bolts\[0\].className: 'count': importing fluxdep_tools for "
                                         r"'fluxdep_tools.Counter' failed: No module named 'fluxdep'$"):
        flux.load(path)
