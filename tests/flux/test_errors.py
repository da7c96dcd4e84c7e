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

CASES = {
    "unknown class": (('"flux_words.WordCounter"', '"flux_words.NoSuchCounter"'),
                      ("t.yaml:12: bolts[0].className: unknown class 'flux_words.NoSuchCounter': "
                      "flux_words has no 'NoSuchCounter'")),
    "unknown module": (('"flux_words.WordCounter"', '"no_such_module.Counter"'),
                       ("t.yaml:12: bolts[0].className: unknown class 'no_such_module.Counter': "
                       "no module 'no_such_module' on sys.path")),
    "a java class": (('"flux_words.WordCounter"', '"org.apache.storm.testing.TestWordCounter"'),
                     ("t.yaml:12: bolts[0].className: unknown class 'org.apache.storm.testing.TestWordCounter': "
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
                          "t.yaml:11: bolts[0]: missing required key 'className'"),
    "missing from": (('  - from: "spout"\n    to:', "  - to:"), "t.yaml:15: streams[0]: missing required key 'from'"),
    "missing grouping": (("    grouping: {type: SHUFFLE}\n", ""), "t.yaml:15: streams[0]: missing required key 'grouping'"),
    "unknown key": ((BOLT_ARGS, BOLT_ARGS + "    parallelizm: 2\n"),
                    "t.yaml:14: bolts[0].parallelizm: unknown key (expected one of: className, "),
    "bad parallelism": ((BOLT_ARGS, BOLT_ARGS + "    parallelism: 0\n"),
                        "t.yaml:14: bolts[0].parallelism: expected an integer of at least 1, got 0"),
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
                              ("t.yaml:13: bolts[0].constructorArgs: flux_words.WordCounter(sink) cannot take the 2 "
                              "argument(s) ['errors', 2]")),
    "no such config method": ((BOLT_ARGS, BOLT_ARGS + '    configMethods:\n      - name: "withNothing"\n'),
                              ("t.yaml:15: bolts[0].configMethods[0].name: WordCounter has no method 'withNothing' "
                              "(nor 'with_nothing')")),
    "no such property": ((BOLT_ARGS, BOLT_ARGS + '    properties:\n      - {name: "colour", value: 1}\n'),
                         "t.yaml:15: bolts[0].properties[0].name: WordCounter has no property 'colour'"),
    "property value and ref": ((BOLT_ARGS, BOLT_ARGS + '    properties:\n      - {name: "sink", value: 1, ref: "x"}\n'),
                               "t.yaml:15: bolts[0].properties[0]: property 'sink' needs a value or a ref"),
    "no factory": (('    constructorArgs: [["a b"]]\n', '    factory: "make"\n'),
                   "t.yaml:4: components[0].className: flux_words.Sentences has no factory method 'make'"),
    "a bolt as a spout": (('"flux_words.SentenceSpout"', '"flux_words.WordCounter"'),
                          "t.yaml:9: spouts[0].constructorArgs: flux_words.WordCounter(sink) cannot take the 2"),
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

    with pytest.raises(FluxError, match=r"^inc.yaml:4: bolts\[0\]: missing required key 'className'$"):
        flux.load(path)


def test_a_constructor_that_raises_is_named_with_its_exception(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(BASE.replace('[["a b"]]', '[5]'))

    with pytest.raises(FluxError, match=r"^t.yaml:5: components\[0\].constructorArgs: flux_words.Sentences\(...\) "
                                         r"raised TypeError: 'int' object is not iterable$"):
        flux.load(path)
