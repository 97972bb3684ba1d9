"""Scanning a changed file definition by definition gives the scan of the whole file, and reuses what it can."""

from __future__ import annotations

import random
import textwrap

from vllm_errors.model import module_scan_from_json, module_scan_to_json
from vllm_errors.scanner import scan_by_definition, scan_module
from vllm_errors.scanner.units import top_units

PATH = "vllm/engine/thing.py"

V1 = textwrap.dedent('''
    """A module."""
    import os
    from vllm import errors

    LIMIT = 8
    PREFIX = "bad value: "


    class Broken(errors.Base):
        """Raised when it breaks."""


    class Runner:
        def __init__(self, vllm_config):
            self.size = vllm_config.cache_config.block_size
            self.name = "runner"

        def step(self):
            if self.size > 64:
                raise ValueError("too large")


    @decorated
    def check(x):
        if x > LIMIT:
            raise ValueError(f"{PREFIX}{x} over {LIMIT}")
        return x


    def other(y):
        from vllm.special import Odd
        if y % 2:
            raise Odd(f"odd {y}")


    def third(z):
        assert z, "z must be set"
        raise Odd("same name, no import here")


    if os.environ.get("X"):
        raise RuntimeError("module level")
''')

# Lines added above everything, `other` reworded, a function added: `check`, `third` and `Runner` only move.
V2 = V1.replace('"""A module."""', '"""A module.\n\nLonger docstring.\n"""').replace('odd {y}', 'y={y} is odd').replace(
    "\nif os.environ", "\ndef added():\n    raise KeyError('new')\n\n\nif os.environ"
)


class Store(dict):
    def lookup(self, keys):
        return {k: self[k] for k in keys if k in self}


def as_json(scan) -> bytes:
    return module_scan_to_json(scan)


def test_by_definition_equals_the_whole_file_scan_and_reuses_unchanged_definitions():
    store = Store()
    first, entries = scan_by_definition(PATH, V1.encode(), store.lookup)
    assert as_json(first) == as_json(scan_module(PATH, V1.encode()))
    assert len(entries) == len(top_units(V1)) + 1  # each definition, and the module-level statements
    store.update(entries)

    second, entries = scan_by_definition(PATH, V2.encode(), store.lookup)
    assert as_json(second) == as_json(scan_module(PATH, V2.encode()))
    # Only `other` (reworded) and `added` are scanned again, plus the module level, which moved.
    rescanned = {s.message.template for value in entries.values() for s in module_scan_from_json(value).sites}
    assert len(entries) == 3 and rescanned == {"y={y} is odd", "new", "module level"}
    # And the moved definitions' lines are where they are now.
    lines = {s.message.template: s.line for s in second.sites}
    assert V2.split("\n")[lines["z must be set"] - 1].strip() == 'assert z, "z must be set"'


def test_any_mix_of_cached_and_fresh_definitions_gives_the_same_scan():
    full = as_json(scan_module(PATH, V2.encode()))
    _, entries = scan_by_definition(PATH, V2.encode(), Store().lookup)
    rnd = random.Random(7)
    for _ in range(20):
        store = Store({k: v for k, v in entries.items() if rnd.random() < 0.5})
        got, _ = scan_by_definition(PATH, V2.encode(), store.lookup)
        assert as_json(got) == full


def test_an_import_inside_one_function_does_not_resolve_names_in_another():
    sites = {s.function: s.exception.qualname for s in scan_module(PATH, V1.encode()).sites}
    assert sites["other"] == "vllm.special.Odd"
    assert sites["third"] == "Odd"


def test_context_stays_inside_its_definition():
    code = "def f():\n    return 1\nclass A:\n    assert X, 'in a class body'\n"
    site = scan_module(PATH, code.encode()).sites[0]
    assert site.code.first_line == 3 and site.code.text.startswith("class A:")


def test_files_that_declare_settings_or_do_not_parse_are_scanned_whole():
    for code in ["@config\nclass C:\n    x: int = 1\n", "def f(:\n    raise ValueError('x')\n"]:
        got, entries = scan_by_definition(PATH, code.encode(), Store().lookup)
        assert entries == {}
        assert as_json(got) == as_json(scan_module(PATH, code.encode()))


def test_a_definition_is_rescanned_only_when_a_name_it_uses_is_bound_anew():
    store = Store()
    _, entries = scan_by_definition(PATH, V1.encode(), store.lookup)
    store.update(entries)
    # An import no definition uses, and a new binding of `LIMIT`, which only `check` reads.
    v2 = V1.replace("import os\n", "import os\nimport sys\n").replace("LIMIT = 8", "LIMIT = 9")
    got, entries = scan_by_definition(PATH, v2.encode(), store.lookup)
    assert as_json(got) == as_json(scan_module(PATH, v2.encode()))
    rescanned = {s.function for value in entries.values() for s in module_scan_from_json(value).sites}
    assert rescanned == {"check", "<module>"}


CLASSY = textwrap.dedent('''
    from vllm import errors


    class Engine(errors.Base):
        """An engine."""

        limit = 4
        assert limit > 0, "limit must be positive"

        def start(self, n):
            from vllm.special import Odd
            if n % 2:
                raise Odd(f"odd {n}")

        @property
        def stop(self):
            raise Odd("no import here")
''')


def test_methods_are_units_of_their_own():
    store = Store()
    first, entries = scan_by_definition(PATH, CLASSY.encode(), store.lookup)
    assert as_json(first) == as_json(scan_module(PATH, CLASSY.encode()))
    store.update(entries)
    # `start` grows by a line: it and its class's own lines are scanned again; `stop` is not.
    v2 = CLASSY.replace('raise Odd(f"odd {n}")', 'raise Odd(\n                    f"odd {n}")')
    second, entries = scan_by_definition(PATH, v2.encode(), store.lookup)
    assert as_json(second) == as_json(scan_module(PATH, v2.encode()))
    rescanned = {s.function for value in entries.values() for s in module_scan_from_json(value).sites}
    assert rescanned == {"Engine.start", "Engine"}
    sites = {s.function: s for s in second.sites}
    assert sites["Engine.start"].exception.qualname == "vllm.special.Odd" and sites["Engine.stop"].exception.qualname == "Odd"
    assert sites["Engine.stop"].line == v2.split("\n").index("        raise Odd(\"no import here\")") + 1
    # A class-level site's code shows the class's own lines, never a method's.
    assert "def start" not in sites["Engine"].code.text
    rnd = random.Random(3)
    _, every = scan_by_definition(PATH, v2.encode(), Store().lookup)
    for _ in range(10):
        some = Store({k: v for k, v in every.items() if rnd.random() < 0.5})
        assert as_json(scan_by_definition(PATH, v2.encode(), some.lookup)[0]) == as_json(second)


EXCEPTIONS = textwrap.dedent('''
    class Busy(Exception):
        def __init__(self):
            super().__init__("The engine is busy.")

        def retry_after(self):
            return 1
''')


def test_a_class_is_rescanned_with_its_init_which_holds_its_message():
    store = Store()
    first, entries = scan_by_definition(PATH, EXCEPTIONS.encode(), store.lookup)
    assert first.classes[0].message.template == "The engine is busy."
    store.update(entries)
    v2 = EXCEPTIONS.replace("The engine is busy.", "The engine is overloaded.")
    second, _ = scan_by_definition(PATH, v2.encode(), store.lookup)
    assert as_json(second) == as_json(scan_module(PATH, v2.encode()))
    assert second.classes[0].message.template == "The engine is overloaded."
    v3 = EXCEPTIONS.replace("return 1", "return 2")  # another method changed: the class's scan is reused
    third, entries = scan_by_definition(PATH, v3.encode(), store.lookup)
    assert as_json(third) == as_json(scan_module(PATH, v3.encode()))
    assert third.classes[0].message.template == "The engine is busy."
