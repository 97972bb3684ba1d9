"""Which selection a file's code runs under (a connector, a model architecture, a parser), from the imports and
registrations of a small vLLM-like fixture, and what the pages say of it."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest

from vllm_errors.annotate import derived_annotator
from vllm_errors.catalog import build_catalog
from vllm_errors.facts import Registration, file_facts
from vllm_errors.model import Snapshot
from vllm_errors.program import Program
from vllm_errors.scanner import scan_module

SNAP = Snapshot(repository="vllm-project/vllm", ref="v1", commit="c" * 40, date="2025-01-01T00:00:00+00:00", upstream_commit="c" * 40)

FIXTURE = {
    "vllm/config/kv_transfer.py": '''
        from vllm.config.utils import config

        @config
        class KVTransferConfig:
            kv_connector: str | None = None
            """The KV connector to use."""
            kv_ip: str | None = None
            kv_pinned: bool = False
            kv_connector_extra_config: dict[str, Any] = field(default_factory=dict)

            def get_from_extra_config(self, key, default):
                return self.kv_connector_extra_config.get(key, default)
    ''',
    "vllm/config/vllm.py": '''
        from vllm.config.utils import config
        from vllm.config.kv_transfer import KVTransferConfig

        @config
        class VllmConfig:
            kv_transfer_config: KVTransferConfig | None = None
    ''',
    "vllm/config/parallel.py": '''
        from vllm.config.utils import config

        @config
        class ParallelConfig:
            tensor_parallel_size: int = 1
            """Number of tensor parallel groups."""
    ''',
    "vllm/engine/arg_utils.py": '''
        from vllm.config.vllm import VllmConfig
        from vllm.config.parallel import ParallelConfig

        def get_kwargs(cls):
            return {}

        class EngineArgs:
            def add_cli_args(parser):
                vllm_kwargs = get_kwargs(VllmConfig)
                parser.add_argument("--kv-transfer-config", **vllm_kwargs["kv_transfer_config"])
                parallel_kwargs = get_kwargs(ParallelConfig)
                parser.add_argument("--tensor-parallel-size", **parallel_kwargs["tensor_parallel_size"])
    ''',
    "vllm/config/current.py": '''
        from vllm.config.vllm import VllmConfig

        def get_current_vllm_config() -> VllmConfig:
            return VllmConfig()
    ''',
    "vllm/layers/heads.py": '''
        from vllm.config.current import get_current_vllm_config
        from vllm.distributed import get_tensor_model_parallel_world_size, get_tp_group

        class Heads:
            def __init__(self, num_heads):
                self.tp_size = get_tensor_model_parallel_world_size()
                if num_heads % self.tp_size != 0:
                    raise ValueError("Heads must split evenly over the tensor-parallel ranks")
                if get_tp_group().world_size > 8:
                    raise ValueError("Heads split over at most 8 ranks")
                if get_current_vllm_config().kv_transfer_config.kv_pinned:
                    raise ValueError("Heads cannot use pinned KV buffers")
    ''',
    "vllm/entrypoints/cli_args.py": '''
        from vllm.config.utils import config

        @config
        class FrontendArgs:
            tool_call_parser: str | None = None
            attention_backend: str | None = None

            @classmethod
            def add_cli_args(cls, parser):
                for key, value in get_kwargs(cls).items():
                    parser.add_argument(f"--{key.replace('_', '-')}", **value)
    ''',
    "vllm/engine/core.py": '''
        from vllm.distributed.kv_connector.common import pack
        from vllm.distributed.kv_connector import factory
    ''',
    "vllm/distributed/kv_connector/factory.py": '''
        class KVConnectorFactory:
            @classmethod
            def register_connector(cls, name, module_path, class_name):
                pass

        KVConnectorFactory.register_connector("FastConnector", "vllm.distributed.kv_connector.fast", "FastConnector")
        KVConnectorFactory.register_connector("SlowConnector", "vllm.distributed.kv_connector.slow", "SlowConnector")
    ''',
    "vllm/distributed/kv_connector/fast/__init__.py": '''
        from .worker import FastConnector
    ''',
    "vllm/distributed/kv_connector/fast/worker.py": '''
        from typing import TYPE_CHECKING
        from vllm.distributed.kv_connector.common import pack

        if TYPE_CHECKING:
            from vllm.engine.core import Engine

        class FastConnector:
            def __init__(self, vllm_config):
                config = vllm_config.kv_transfer_config
                depth = config.get_from_extra_config("queue_depth", 0)
                if depth > 16:
                    raise ValueError("The fast connector queues at most 16 sends")
                if not self.extra_config.get("peer_host"):
                    raise ValueError("The fast connector needs a peer host")
                if not config.kv_ip:
                    raise ValueError("The fast connector needs an address")
                if not config.kv_pinned:
                    raise ValueError("The fast connector needs pinned buffers")

            def send(self, blocks):
                if len(blocks) > 64:
                    raise ValueError("The fast connector sends at most 64 blocks")
                return pack(blocks)
    ''',
    "vllm/distributed/kv_connector/slow.py": '''
        import importlib

        def load():
            return importlib.import_module("vllm.distributed.kv_connector.wire")
    ''',
    "vllm/distributed/kv_connector/wire.py": '''
        def frame(n):
            if n < 0:
                raise ValueError("A wire frame needs a size of at least 0")
    ''',
    "vllm/distributed/kv_connector/common.py": '''
        def pack(blocks):
            if not blocks:
                raise ValueError("Nothing to pack for the connector")
    ''',
    "vllm/backends/registry.py": '''
        from enum import Enum


        class AttentionBackendEnum(Enum):
            FAST = "vllm.backends.fast.FastBackend"
            SLOW = "vllm.backends.slow.SlowBackend"
    ''',
    "vllm/backends/fast.py": '''
        class FastBackend:
            @staticmethod
            def get_impl_cls():
                return FastImpl


        class FastImpl:
            def forward(self, layer):
                if layer.scale != 1.0:
                    raise NotImplementedError("The fast backend takes no scales")
    ''',
    "vllm/tool_parsers/__init__.py": '''
        _TOOL_PARSERS_TO_REGISTER = {
            "alpha": ("alpha_parser", "AlphaParser"),
            "beta": ("beta_parser", "BetaParser"),
            "gamma": ("gamma_parser", "GammaParser"),
        }
    ''',
    "vllm/tool_parsers/alpha_parser.py": '''
        class AlphaParser:
            def parse(self, text):
                if "<call>" not in text:
                    raise ValueError("Alpha tool calls start with <call>")
    ''',
    "vllm/reasoning/__init__.py": '''
        _REASONING_PARSERS_TO_REGISTER = {
            "one": ("one_parser", "OneParser"),
            "two": ("two_parser", "TwoParser"),
            "three": ("three_parser", "ThreeParser"),
        }
    ''',
    "vllm/reasoning/one_parser.py": '''
        def think(text):
            if not text:
                raise ValueError("One needs a reasoning text")
    ''',
    "vllm/model_executor/models/registry.py": '''
        _TEXT_GENERATION_MODELS = {
            "OwlForCausalLM": ("owl", "OwlForCausalLM"),
            "OwlMoeForCausalLM": ("owl", "OwlMoeForCausalLM"),
            "LarkForCausalLM": ("lark", "LarkForCausalLM"),
        }
    ''',
    "vllm/model_executor/models/owl.py": '''
        class OwlEncoder:
            def encode(self, x):
                if not x:
                    raise ValueError("The owl encoder needs an input")


        class OwlForCausalLM:
            def __init__(self, config):
                if config.num_heads % 4:
                    raise ValueError("Owl needs a head count that 4 divides")


        class OwlMoeForCausalLM(OwlForCausalLM):
            pass
    ''',
    "vllm/model_executor/models/lark.py": '''
        from .owl import OwlEncoder


        class LarkForCausalLM:
            def __init__(self, config):
                self.encoder = OwlEncoder()
    ''',
}


@pytest.fixture(scope="module")
def catalog():
    sources = {path: textwrap.dedent(text).encode() for path, text in sorted(FIXTURE.items())}
    scans = [scan_module(path, text) for path, text in sources.items()]
    program = Program({path: file_facts(path, text) for path, text in sources.items()})
    return replace(build_catalog(SNAP, scans, len(scans)), program=program)


@pytest.fixture(scope="module")
def pages(catalog):
    derive = derived_annotator(catalog)
    return {e.template: derive(e) for e in catalog.errors}


def test_registrations_are_read_from_calls_dicts_and_enums():
    calls = file_facts("vllm/f.py", textwrap.dedent(FIXTURE["vllm/distributed/kv_connector/factory.py"]).encode())
    assert calls.registrations == (
        Registration("KVConnectorFactory.register_connector", "FastConnector", "vllm.distributed.kv_connector.fast", "FastConnector"),
        Registration("KVConnectorFactory.register_connector", "SlowConnector", "vllm.distributed.kv_connector.slow", "SlowConnector"),
    )
    table = file_facts("vllm/tool_parsers/__init__.py", textwrap.dedent(FIXTURE["vllm/tool_parsers/__init__.py"]).encode())
    assert [(r.name, r.module) for r in table.registrations][0] == ("alpha", "vllm.tool_parsers.alpha_parser")  # relative to the package
    enum = file_facts("vllm/b.py", b'from enum import Enum\n\nclass BackendEnum(Enum):\n    FAST = "vllm.backends.fast.FastBackend"\n    n = 3\n')
    assert enum.registrations == (Registration("BackendEnum", "FAST", "vllm.backends.fast", "FastBackend"),)
    # a registered module is no import of the registry's file: it is loaded only when selected
    assert "vllm.distributed.kv_connector.fast" not in calls.imports


def test_imports_resolve_relative_names_and_skip_type_checking():
    found = file_facts("vllm/distributed/kv_connector/fast/worker.py", textwrap.dedent(FIXTURE["vllm/distributed/kv_connector/fast/worker.py"]).encode())
    assert "vllm.distributed.kv_connector.common.pack" in found.imports
    assert not any(i.startswith("vllm.engine") for i in found.imports)
    init = file_facts("vllm/distributed/kv_connector/fast/__init__.py", b"from .worker import FastConnector\nfrom .. import common\n")
    assert "vllm.distributed.kv_connector.fast.worker" in init.imports and "vllm.distributed.kv_connector.common" in init.imports


def test_code_imported_only_for_a_registered_name_runs_under_it(catalog):
    program = catalog.program
    assert [r.name for r in program.selected_by("vllm/distributed/kv_connector/fast/worker.py")] == ["FastConnector"]
    # imported by vLLM's engine as well: it runs whatever the selection
    assert program.selected_by("vllm/distributed/kv_connector/common.py") is None
    # a module named in a string is imported by that file (importlib), and so runs under its selection
    assert [r.name for r in program.selected_by("vllm/distributed/kv_connector/wire.py")] == ["SlowConnector"]
    assert program.selected_by("vllm/engine/core.py") is None


def test_a_connectors_code_says_which_connector_runs_it_and_how_to_avoid_it(pages):
    page = pages["The fast connector sends at most 64 blocks"]
    # the flag names it, though vLLM may pick a connector from other flags too
    assert ("this code runs only when the KV connector in use is `FastConnector` (the `kv_connector` key of `--kv-transfer-config` "
            "names it)") in page.meaning
    assert "Select another KV connector with the `kv_connector` key of `--kv-transfer-config` (this code runs only with `FastConnector`)." in page.solutions
    assert "runs only when" not in pages["Nothing to pack for the connector"].meaning


def test_a_parsers_code_is_avoided_with_another_parser(pages):
    page = pages["Alpha tool calls start with <call>"]
    assert "the tool-call parser in use is `alpha` (named with `--tool-call-parser`)" in page.meaning
    assert "Use another `--tool-call-parser`, or none (this code runs only with `alpha`)." in page.solutions


def test_a_backend_vllm_picks_itself_is_said_so(pages):
    # the Enum's string names the backend's module: it is no import of the registry's file
    page = pages["The fast backend takes no scales"]
    assert ("this code runs only when vLLM uses the attention backend `FAST` (picked for your GPU and model, or named with "
            "`--attention-backend`)") in page.meaning
    assert "Name another attention backend with `--attention-backend` (this code runs only with `FAST`)." in page.solutions


def test_a_selection_whose_lever_the_release_lacks_is_not_said(pages):
    page = pages["One needs a reasoning text"]  # no --reasoning-parser flag in this release
    assert "runs only when" not in page.meaning and not any("reasoning" in s for s in page.solutions)


def test_a_models_code_names_its_architectures(pages):
    # a method of the registered class (and of the classes built on it) runs for those; lark imports the file for its encoder
    page = pages["Owl needs a head count that 4 divides"]
    assert "the model's architecture is one of `OwlForCausalLM`, `OwlMoeForCausalLM` (the `architectures` of its `config.json`)" in page.meaning
    assert not any("architecture" in s for s in page.solutions)  # the model is what the user runs: no way around
    page = pages["The owl encoder needs an input"]
    assert "the model's architecture is one of `OwlForCausalLM`, `OwlMoeForCausalLM`, `LarkForCausalLM`" in page.meaning


def test_a_key_of_a_connectors_extra_config_is_a_lever(pages):
    assert pages["The fast connector queues at most 16 sends"].solutions[0] == (
        "Make `queue_depth` in the `kv_connector_extra_config` of `--kv-transfer-config` at most `16`.")
    # a plain `extra_config`: the connector whose code reads it tells whose it is; its type is unknown
    assert pages["The fast connector needs a peer host"].solutions[0] == (
        "Give `peer_host` in the `kv_connector_extra_config` of `--kv-transfer-config` a value that is not empty, zero or false.")


def test_what_makes_a_setting_true_is_said_by_its_type(pages):
    assert pages["The fast connector needs an address"].solutions[0] == "Give `kv_ip` in `--kv-transfer-config` a value that is not empty."
    assert pages["The fast connector needs pinned buffers"].solutions[0] == "Turn on `kv_pinned` in `--kv-transfer-config` (default `False`)."


def test_a_parallel_groups_size_is_its_flag_and_a_config_a_call_returns_is_read_through(pages):
    assert pages["Heads must split evenly over the tensor-parallel ranks"].solutions[0].startswith(
        "Use a value of `--tensor-parallel-size` (`ParallelConfig.tensor_parallel_size`) that divides `num_heads`")
    assert pages["Heads split over at most 8 ranks"].solutions[0].startswith("Make `--tensor-parallel-size`")
    page = pages["Heads cannot use pinned KV buffers"]
    assert page.solutions[0] == "Turn off `kv_pinned` in `--kv-transfer-config` (default `False`)."
    # the key, not the JSON flag that holds it as well
    assert "`--kv-transfer-config` (`VllmConfig.kv_transfer_config`)" not in page.meaning


def test_report_counts_the_errors_that_run_under_a_selection(catalog):
    from vllm_errors.cli import coverage_lines
    from vllm_errors.knowledge import build_knowledge_base

    kb = build_knowledge_base(catalog, (derived_annotator(catalog),), ())
    (line,) = [line for line in coverage_lines(kb) if line.startswith("run only when")]
    # the fast connector's 5 and the slow one's, the fast backend's, the alpha parser's and the owl models' 2; the models'
    # have no way around
    assert line == (f"run only when a connector, model architecture, parser or backend is selected: 10 ({10 / len(kb.records):.1%}); "
                    "with another one to select as a way around it: 8")
