"""The facts of whole files (extractor/facts.py): asserts without a message, where they are in each release."""

from __future__ import annotations

import ast
from dataclasses import replace

import git

from vllm_errors import facts, pipeline
from vllm_errors.cache import ScanCache
from vllm_errors.model import BareAssert
from fixture_repo import make_repo

CODE = b'''
import os

assert os.sep


class Runner:
    def execute(self, batch):
        assert batch is not None
        assert batch.size > 0, "an empty batch"
        assert (batch.num_tokens ==
                len(batch.slots))

        def inner():
            assert 'x' in batch.names
'''


def test_only_asserts_without_a_message_with_their_qualified_function():
    found = facts.file_facts("vllm/runner.py", CODE).asserts
    assert found == (
        BareAssert("vllm/runner.py", 4, "", "os.sep"),
        BareAssert("vllm/runner.py", 9, "Runner.execute", "batchisnotNone"),
        BareAssert("vllm/runner.py", 11, "Runner.execute", "batch.num_tokens==lenbatch.slots"),
        BareAssert("vllm/runner.py", 15, "Runner.execute.inner", '"x"inbatch.names'),
    )


def test_an_expression_has_one_key_however_it_is_wrapped_or_quoted():
    assert facts.assert_key("(batch.num_tokens ==\n    len(batch.slots))") == facts.assert_key("batch.num_tokens == len( batch.slots )")
    assert facts.assert_key("'x' in names") == facts.assert_key('"x" in names')
    assert facts.assert_key("a < b") != facts.assert_key("a <= b")


def test_a_file_that_does_not_parse_has_no_facts():
    assert facts.file_facts("vllm/broken.py", b"def f(:\n    assert x\n").asserts == ()


def test_each_assert_has_its_line_in_every_release_that_has_it(tmp_path):
    first = {"vllm/__init__.py": "", "vllm/w.py": "def f(x):\n    assert x > 1\n    assert x < 9\n"}
    second = {"vllm/__init__.py": "", "vllm/w.py": "import os\n\n\ndef f(x):\n    assert x > 1\n"}
    repo = make_repo(tmp_path, {"v1": first, "v2": second})
    request = pipeline.ScanRequest(repo=str(repo), ref="v1", cache_dir=tmp_path / "cache", progress=False)
    catalogs = [pipeline.scan_release(replace(request, ref=ref))[0] for ref in ("v1", "v2")]
    assert [a.line for a in catalogs[0].bare_asserts] == [2, 3]
    sites = {a.expression: a.lines for a in facts.assert_sites(catalogs)}
    assert sites == {"x>1": (("v1", 2), ("v2", 5)), "x<9": (("v1", 3),)}


def test_facts_come_from_the_cache_once_read(tmp_path):
    repo = make_repo(tmp_path, {"v1": {"vllm/__init__.py": "", "vllm/w.py": "def f(x):\n    assert x\n\n\ndef g(y):\n    f(y.size)\n"}})
    request = pipeline.ScanRequest(repo=str(repo), ref="v1", cache_dir=tmp_path / "cache", progress=False)
    catalog, _ = pipeline.scan_release(request)
    assert [(a.line, a.function, a.expression) for a in catalog.bare_asserts] == [(2, "f", "x")]
    blob = _blob(repo, "v1", "vllm/w.py")
    with ScanCache(tmp_path / "cache") as cache:  # a cached fact is read, not the file again
        cache.put(facts.facts_key("vllm/w.py", blob, "asserts"), b'[[7, "g", "cached"]]')
    again, _ = pipeline.scan_release(request)
    assert [(a.line, a.function, a.expression) for a in again.bare_asserts] == [(7, "g", "cached")]
    # the program's facts are read from the cache only when asked, and link the call to f's parameter
    (site,) = again.program.callers("vllm/w.py", "f", "x")
    assert (site.call.caller, site.call.line, site.argument) == ("g", 6, "y.size")


def _blob(repo, ref: str, path: str) -> str:
    return git.Repo(repo).commit(ref).tree[path].hexsha


def test_program_facts_keep_what_they_are_stored_as():
    found = facts.file_facts("vllm/runner.py", CODE)
    stored = facts._program_facts(facts._encoded(found)[1])
    assert stored == facts.FileFacts((), found.definitions, found.calls, found.bindings) and found.calls


def test_a_definition_keeps_the_class_its_return_annotation_names():
    found = facts.file_facts("vllm/c.py", b"""
import typing
def a() -> "CacheConfig | None": ...
def b() -> typing.Optional[mod.ModelConfig]: ...
def c() -> None | LoadConfig: ...
def d() -> list[int]: ...
def e(): ...
""")
    assert {d.qualname: d.returns for d in found.definitions} == {"a": "CacheConfig", "b": "ModelConfig", "c": "LoadConfig", "d": "", "e": ""}


def test_a_call_knows_what_holds_where_it_runs():
    found = facts.file_facts("vllm/k.py", b"""
def g(x, n):
    assert n > 0
    if x is None:
        return
    if x.size > 4 and n:
        f(x, n)
    else:
        h(x)
    while n > 1:
        k(n)
    f(x, n)


def other():
    f(1, 2)
""")
    assert [(c.name, c.known) for c in found.calls] == [
        ("f", ("n > 0", "x is not None", "x.size > 4", "n")),
        ("h", ("n > 0", "x is not None", "x.size <= 4 or not n")),
        ("k", ("n > 0", "x is not None", "n > 1")),
        ("f", ("n > 0", "x is not None")),
        ("f", ()),  # another function knows nothing of g's checks
    ]


def test_locals_bound_more_than_once_are_known_and_reading_them_leaves_the_tree_as_it_was():
    found = facts.file_facts("vllm/x.py", b"""
import os


def pick(self, wide):
    size = self.cache.size
    if wide:
        entry, rest = self.items[0], self.items[1:]
    else:
        entry = None
    for item in self.items:
        total = item
    total = 0
    self.slots[0] -= 1
    return size, entry, rest, total
""")
    (pick,) = [d for d in found.definitions if d.qualname == "pick"]
    assert pick.rebound == ("entry", "total")  # `rest` once, `self.slots[0] -= 1` changes an object, binds no name
    # the walk that counts them must not eat the assignments the bindings are read from
    assert [(b.name, b.value) for b in found.bindings] == [("size", "self.cache.size")]


def test_what_a_handler_that_catches_logs_is_kept_as_a_template():
    found = facts.file_facts("vllm/h.py", b"""
import logging, warnings
logger = logging.getLogger(__name__)

def f(x):
    try:
        run(x)
    except ValueError as e:
        logger.warning("Run of %s failed: %r (%d%% done)", x.name, e, 50)
    except KeyError:
        logger.exception(f"No key {x.key} in the table")
    except OSError as e:
        logger.error("Cannot read: %s", e)
        raise
    except TypeError:
        warnings.warn("Type trouble; going on", stacklevel=2)
    except IndexError:
        logger.info(message)
    try:
        run(x)
    except Exception:
        print("not a log line")
""")
    # the level as the log line shows it; %-placeholders named by what fills them; a handler that raises again, a message
    # that is no literal text and a print are no log line shown in the error's place
    assert found.logged == ((8, "warning", "Run of {x.name} failed: {e} (50% done)"), (10, "error", "No key {x.key} in the table"),
                            (15, "warning", "Type trouble; going on"))
    assert facts._program_facts(facts._encoded(found)[1]).logged == found.logged


def test_a_definition_keeps_the_literals_its_parameters_default_to():
    found = facts.file_facts("vllm/d.py", b"""
def f(a, b=1, *args, c=None, d=make(), e="x", **kw): ...
def g(a, b): ...
""")
    defs = {d.qualname: d for d in found.definitions}
    assert dict(zip(defs["f"].params, defs["f"].defaults)) == {"a": "", "b": "1", "*": "", "c": "None", "d": "", "e": "'x'"}
    assert defs["g"].defaults == ()  # none: nothing stored
    assert facts._program_facts(facts._encoded(found)[1]).definitions == found.definitions


def test_calls_of_a_name_defined_twice_are_linked_by_what_the_calling_file_binds_it_to():
    from vllm_errors.program import Program
    sources = {
        "vllm/a/ops.py": b"def pack(x, mode='fast'):\n    if mode != 'fast':\n        raise ValueError(mode)\n",
        "vllm/b/ops.py": b"def pack(x):\n    raise ValueError(x)\n",
        "vllm/a/__init__.py": b"from vllm.a.ops import pack\n",  # a package passing on what it imports
        "vllm/a/user.py": b"from vllm.a import pack\n\ndef run(t):\n    return pack(t)\n",
        "vllm/b/user.py": b"from vllm.b.ops import pack\n\ndef run(t):\n    return pack(t, 1)\n",
        "vllm/c.py": b"def run(t):\n    def pack(y):\n        return y\n    return pack(t)\n",  # its own nested pack
        "vllm/d.py": b"class Layer:\n    def prep(self, x):\n        return x\n\n    def forward(self, x):\n        return self.prep(x)\n\n"
                     b"class Other:\n    def prep(self, x):\n        return x\n",
    }
    program = Program({path: facts.file_facts(path, code) for path, code in sources.items()})
    assert [(p, c.caller) for p, c in program.calls_of("vllm/a/ops.py", "pack")] == [("vllm/a/user.py", "run")]
    assert [(p, c.args) for p, c in program.calls_of("vllm/b/ops.py", "pack")] == [("vllm/b/user.py", ("t", "1"))]
    # its callers pass no mode: the default decides the check, as where the name is defined once
    assert program.passed_accepted("vllm/a/ops.py", "pack", [ast.parse("mode != 'fast'", mode="eval").body])
    assert [c.caller for _, c in program.calls_of("vllm/d.py", "Layer.prep")] == ["Layer.forward"]
    assert program.calls_of("vllm/d.py", "Other.prep") == []


def test_a_call_that_could_reach_either_of_two_definitions_leaves_both_unlinked():
    from vllm_errors.program import Program
    sources = {
        "vllm/a.py": b"class Norm:\n    def prep(self, x):\n        return x\n",
        "vllm/b.py": b"class Norm2:\n    def prep(self, x):\n        return x\n",
        "vllm/c.py": b"def run(layer, x):\n    return layer.prep(x)\n",  # either's
        "vllm/d.py": b"from vllm.a import Norm\n\nclass Sub(Norm):\n    def prep(self, x):\n        return x\n\n"
                     b"    def go(self, x):\n        return self.prep(x)\n",
        "vllm/e.py": b"def helper(x):\n    raise ValueError(x)\n",
        "vllm/f.py": b"def helper(x):\n    raise ValueError(x)\n",
        "vllm/g.py": b"def run(x):\n    return helper(x)\n",  # bound by nothing the facts show
    }
    program = Program({path: facts.file_facts(path, code) for path, code in sources.items()})
    assert program.calls_of("vllm/a.py", "Norm.prep") is None
    assert program.calls_of("vllm/e.py", "helper") is None
