"""Grouping sites into errors: identity, stability of ids, exception classes and their hierarchy."""

from __future__ import annotations

import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_errors.catalog import build_catalog, hierarchy
from vllm_errors.model import Snapshot, catalog_from_json, catalog_to_json
from vllm_errors.scanner import scan_module

SNAP = Snapshot(repository="vllm-project/vllm", ref="v1", commit="c" * 40, date="2025-01-01T00:00:00+00:00", upstream_commit="c" * 40)


def catalog_of(files: dict[str, str]):
    scans = [scan_module(path, textwrap.dedent(code).encode()) for path, code in sorted(files.items())]
    return build_catalog(SNAP, scans, len(files))


def ids_by_template(catalog):
    return {e.template: e.id for e in catalog.errors}


def test_sites_sharing_a_message_form_one_error_whatever_the_placeholder_names():
    catalog = catalog_of(
        {
            "vllm/a.py": "def f(n):\n    raise ValueError(f'too many: {n}')\n",
            "vllm/b.py": "def g(self):\n    raise ValueError(f'too many:  {self.count}')\n",
            "vllm/c.py": "def h(n):\n    raise TypeError(f'too many: {n}')\n",
        }
    )
    by_exc = {e.exception: e for e in catalog.errors}
    assert [(s.path, s.function) for s in by_exc["ValueError"].sites] == [("vllm/a.py", "f"), ("vllm/b.py", "g")]
    assert len(by_exc["TypeError"].sites) == 1
    assert all(len(e.id) == 16 and int(e.id, 16) >= 0 for e in catalog.errors)


def test_messageless_raises_group_by_function_not_by_type():
    catalog = catalog_of({"vllm/a.py": "def f():\n    raise NotImplementedError\n\ndef g():\n    raise NotImplementedError\n    raise NotImplementedError()\n"})
    assert sorted(len(e.sites) for e in catalog.errors) == [1, 2]


def test_id_survives_moving_code_to_another_file_and_line():
    before = catalog_of({"vllm/a.py": "def f(x):\n    if x:\n        raise ValueError(f'bad {x}')\n"})
    after = catalog_of({"vllm/z/b.py": "import os\n\n\nclass K:\n    def g(self, y):\n        raise ValueError(f'bad {y}')\n"})
    assert ids_by_template(before)["bad {x}"] == ids_by_template(after)["bad {y}"]


@settings(max_examples=30, deadline=None)
@given(filler=st.lists(st.sampled_from(["x = 1", "", "# note", "def other():\n    return 2", "import os"]), max_size=12))
def test_id_does_not_change_when_lines_are_inserted_above(filler):
    code = "def f(a):\n    if a > 3:\n        raise ValueError(f'value {a} is over 3')\n"
    base = catalog_of({"vllm/m.py": code})
    moved = catalog_of({"vllm/m.py": "\n".join(filler) + "\n" + code})
    assert [e.id for e in base.errors] == [e.id for e in moved.errors]


def test_reexported_exception_resolves_to_its_defining_module():
    catalog = catalog_of(
        {
            "vllm/exceptions.py": "class VLLMError(Exception):\n    pass\nclass VLLMClientError(VLLMError):\n    pass\nclass VLLMValidationError(VLLMClientError):\n    pass\n",
            "vllm/__init__.py": "from vllm.exceptions import VLLMValidationError\n",
            "vllm/api.py": "from vllm import VLLMValidationError\ndef f():\n    raise VLLMValidationError('bad request')\n",
        }
    )
    (error,) = catalog.errors
    assert error.exception == "vllm.exceptions.VLLMValidationError"
    assert hierarchy(error.exception, catalog.exception_classes) == (
        "vllm.exceptions.VLLMValidationError",
        "vllm.exceptions.VLLMClientError",
        "vllm.exceptions.VLLMError",
        "Exception",
    )


def test_exception_classes_are_found_through_other_classes_and_third_party_names():
    catalog = catalog_of(
        {
            "vllm/a.py": "from fastapi import HTTPException\nclass Base(RuntimeError): pass\nclass Leaf(Base): pass\nclass Web(HTTPException): pass\nclass NotAnError(dict): pass\n",
            "vllm/b.py": "class Base(ValueError): pass\n",
        }
    )
    assert [c.qualname for c in catalog.exception_classes] == ["vllm.a.Base", "vllm.a.Leaf", "vllm.a.Web", "vllm.b.Base"]


def test_catalog_round_trips_through_json():
    catalog = catalog_of({"vllm/a.py": "def f(x):\n    if x:\n        raise ValueError(f'bad {x}')\n    assert x, 'never'\n"})
    text = catalog_to_json(catalog)
    assert catalog_from_json(text) == catalog
    assert catalog_to_json(catalog_from_json(text)) == text


def test_titles_show_literal_braces_as_users_see_them():
    from vllm_errors.knowledge import build_knowledge_base

    catalog = catalog_of({"vllm/a.py": "def f(x):\n    raise ValueError(f'expected {{\"a\": 1}}, got {x}')\n"})
    (error,) = catalog.errors
    assert error.template == 'expected {{"a": 1}}, got {x}'
    assert build_knowledge_base(catalog).records[0].title == 'ValueError: expected {"a": 1}, got {x}'


CLASS_MESSAGES = {
    "vllm/exceptions.py": '''
        class Busy(Exception):
            MESSAGE = "The engine is busy; try again later."

            def __init__(self):
                super().__init__(self.MESSAGE)


        class Dead(Exception):
            def __init__(self, *args, suppress_context=False, **kwargs):
                text = "The engine died. See the stack trace above."
                super().__init__(text, *args, **kwargs)


        class Retry(Exception):
            def __init__(self, message: str = "Request failed; please retry"):
                super().__init__(message)


        class Overloaded(Busy):
            pass


        class Plain(Exception):
            def __init__(self, message):
                super().__init__(message)
    ''',
    "vllm/engine.py": '''
        from vllm.exceptions import Busy, Dead, Overloaded, Plain, Retry

        def admit():
            raise Busy()

        def admit_again():
            raise Busy

        def poll():
            raise Dead(suppress_context=True)

        def retry(reason):
            if reason:
                raise Retry(f"Request failed: {reason}")
            raise Retry()

        def shed():
            raise Overloaded()

        def plain():
            raise Plain()
    ''',
}


def test_raising_a_class_without_a_message_takes_the_message_its_init_passes_on():
    catalog = catalog_of(CLASS_MESSAGES)
    by_function = {s.function: e for e in catalog.errors for s in e.sites}
    assert by_function["admit"].template == "The engine is busy; try again later."
    assert by_function["admit"] is by_function["admit_again"], "both raises say the same: one error"
    assert by_function["poll"].template == "The engine died. See the stack trace above."
    assert by_function["retry"].template in ("Request failed; please retry", "Request failed: {reason}")
    assert {e.template for e in catalog.errors if any(s.function == "retry" for s in e.sites)} == {
        "Request failed; please retry", "Request failed: {reason}"}
    assert by_function["shed"].template == "The engine is busy; try again later.", "inherited from its base"
    assert by_function["shed"].exception == "vllm.exceptions.Overloaded"
    assert not by_function["plain"].template, "no default to take"
    site = next(s for s in by_function["admit"].sites if s.function == "admit")
    assert site.message.form == "class" and "Busy" in site.message.note


def test_wrappers_are_known_from_the_code():
    from vllm_errors.knowledge import wrapper_kind

    catalog = catalog_of({"vllm/engine.py": '''
        def start(procs):
            raise RuntimeError(f"Engine core initialization failed. See root cause above. Failed core proc(s): {procs}")

        def run(batch):
            try:
                step(batch)
            except Exception as e:
                raise type(e)(f"Error in model execution: {str(e)}") from e

        def load(path):
            try:
                read(path)
            except OSError as err:
                raise ValueError(f"Cannot load {path}: {err}") from err

        def check(e):
            raise ValueError(f"Invalid value {e}")
    '''})
    kinds = {e.sites[0].function: wrapper_kind(e) for e in catalog.errors}
    assert kinds == {"start": "points", "run": "embeds", "load": "embeds", "check": ""}, "a name alone, outside an except block, embeds nothing"
