"""The derived annotator on a small vLLM-like fixture: triggers, solutions, flags, env vars, example fixes, kinds."""

from __future__ import annotations

import ast
import re
import shlex
import textwrap
from dataclasses import replace

import pytest

from vllm_errors.annotate import REPASSED, derived_annotator
from vllm_errors.catalog import build_catalog
from vllm_errors.facts import file_facts
from vllm_errors.knowledge import build_knowledge_base
from vllm_errors.model import GlossaryTerm, Snapshot
from vllm_errors.program import Program
from vllm_errors.scanner import scan_module

SNAP = Snapshot(repository="vllm-project/vllm", ref="v1", commit="b" * 40, date="2025-01-01T00:00:00+00:00", upstream_commit="b" * 40)

FIXTURE = {
    "vllm/config/cache.py": '''
        from typing import Literal
        from vllm.config.utils import config
        from dataclasses import field

        CacheDType = Literal["auto", "fp8", "bfloat16"]

        @config
        class CacheConfig:
            cache_dtype: CacheDType = "auto"
            """Data type for kv cache storage."""
            block_size: int = field(default=16)
            """Size of a cache block in tokens."""

            def verify(self):
                if self.cache_dtype == "fp8" and self.block_size > 32:
                    raise ValueError(f"fp8 KV cache needs block_size <= 32, got {self.block_size}")
    ''',
    "vllm/config/vllm.py": '''
        from vllm.config.utils import config
        from vllm.config.cache import CacheConfig

        @config
        class VllmConfig:
            cache_config: CacheConfig = None
    ''',
    "vllm/engine/arg_utils.py": '''
        from vllm.config.cache import CacheConfig

        def get_kwargs(cls):
            return {}

        class EngineArgs:
            def add_cli_args(parser):
                cache_kwargs = get_kwargs(CacheConfig)
                parser.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
                parser.add_argument("--block-size", **{**cache_kwargs["block_size"], "default": None})
                parser.add_argument("--enable-lora", action="store_true", help="sets no config field")
    ''',
    "vllm/entrypoints/cli_args.py": '''
        from vllm.config.utils import config

        @config
        class BaseFrontendArgs:
            chat_template: str | None = None

            @classmethod
            def add_cli_args(cls, parser):
                for key, value in get_kwargs(cls).items():
                    parser.add_argument(f"--{key.replace('_', '-')}", **value)

        @config
        class FrontendArgs(BaseFrontendArgs):
            port: int = 8000
    ''',
    "vllm/envs.py": '''
        import os
        environment_variables = {
            # If set, vLLM will disable the MLA attention optimizations.
            "VLLM_MLA_DISABLE": lambda: bool(int(os.getenv("VLLM_MLA_DISABLE", "0"))),
        }
    ''',
    "vllm/attention/select.py": '''
        import vllm.envs as envs

        def pick(vllm_config, lmcache_config, use_mla):
            cache_config = vllm_config.cache_config
            if cache_config.cache_dtype not in ("auto", "bfloat16"):
                raise NotImplementedError("This backend only supports auto or bfloat16 KV cache")
            if envs.VLLM_MLA_DISABLE:
                raise ValueError("MLA is disabled by the environment")
            if use_mla and (lmcache_config.remote_serde != "naive" and lmcache_config.remote_serde is not None):
                raise ValueError("MLA only works with naive serde mode..")

        def internal(x):
            assert x is not None, "This line should be unreachable."

        def limit(vllm_config):
            size = vllm_config.cache_config.block_size
            if size > 64:
                raise ValueError("Blocks of more than 64 tokens are not supported here")

        def rerun(job):
            try:
                job()
            except OSError as e:
                raise e

        class Runner:
            def step(self):
                raise NotImplementedError("subclasses step")

        class Pool:
            def __init__(self, vllm_config):
                self.tokens = vllm_config.cache_config.block_size

            def grow(self):
                if self.tokens > 128:
                    raise ValueError("A pool cannot hold blocks of more than 128 tokens")

        def dispatch(name):
            if name == "fast":
                return 1
            if name == "slow":
                return 2
            raise ValueError(f"Unknown backend {name}")
    ''',
}


@pytest.fixture(scope="module")
def annotate():
    scans = [scan_module(path, textwrap.dedent(code).encode()) for path, code in sorted(FIXTURE.items())]
    catalog = build_catalog(SNAP, scans, len(scans))
    derive = derived_annotator(catalog)
    return {e.template: derive(e) for e in catalog.errors}, catalog


def test_settings_are_read_from_the_release(annotate):
    _, catalog = annotate
    flags = {f.flags: (f.config, f.field) for f in catalog.flags}
    assert flags == {
        ("--kv-cache-dtype",): ("CacheConfig", "cache_dtype"),
        ("--block-size",): ("CacheConfig", "block_size"),
        ("--enable-lora",): ("", ""),
        ("--chat-template",): ("BaseFrontendArgs", "chat_template"),
        ("--port",): ("FrontendArgs", "port"),
    }
    fields = {(f.config, f.name): f for f in catalog.config_fields}
    assert fields[("CacheConfig", "cache_dtype")].choices == ('"auto"', '"fp8"', '"bfloat16"')
    assert fields[("CacheConfig", "block_size")].default == "16"
    assert fields[("CacheConfig", "cache_dtype")].doc == "Data type for kv cache storage."
    (env,) = catalog.env_vars
    assert (env.name, env.doc, env.default) == ("VLLM_MLA_DISABLE", "If set, vLLM will disable the MLA attention optimizations.", '"0"')


def test_self_field_in_a_config_class_names_its_flag(annotate):
    notes, _ = annotate
    a = notes["fp8 KV cache needs block_size <= 32, got {self.block_size}"]
    assert a.kind == "user"
    assert any("`--block-size`" in s and "at most `32`" in s and "default `16`" in s for s in a.solutions)
    assert any("`--kv-cache-dtype`" in s for s in a.solutions)


def test_config_reached_through_vllm_config_names_its_flag_and_choices(annotate):
    notes, _ = annotate
    a = notes["This backend only supports auto or bfloat16 KV cache"]
    (solution,) = a.solutions
    assert solution.startswith("Set `--kv-cache-dtype` (`CacheConfig.cache_dtype`) to one of `\"auto\"`, `\"bfloat16\"`")
    assert a.example_fix.language == "shell"
    assert a.example_fix.after == "vllm serve MODEL --kv-cache-dtype auto"
    assert a.example_fix.before == "vllm serve MODEL --kv-cache-dtype fp8"


def test_environment_variable_is_named_with_its_documentation(annotate):
    notes, _ = annotate
    (solution,) = notes["MLA is disabled by the environment"].solutions
    assert "`VLLM_MLA_DISABLE`" in solution and "disable the MLA attention optimizations" in solution


def test_reference_like_guard(annotate):
    notes, _ = annotate
    a = notes["MLA only works with naive serde mode.."]
    (trigger,) = a.triggers
    assert "`use_mla` is true" in trigger and "`lmcache_config.remote_serde` is neither `\"naive\"` nor None" in trigger
    # `lmcache_config.remote_serde` is LMCache's, reached by no flag or VLLM_* variable vLLM declares: no solution
    # tells the user to set vLLM's variable, and no example fix assigns it.
    assert a.solutions == () and a.example_fix is None
    assert "A `ValueError` raised while `pick` runs, in attention." in a.meaning
    assert a.sources == {"meaning": "derived", "triggers": "derived"}


def test_glossary_terms_found_in_message_guard_or_path_become_record_terms(annotate):
    _, catalog = annotate
    glossary = (
        GlossaryTerm(term="MLA", pattern=r"\bmla\b", definition="Multi-head Latent Attention."),
        GlossaryTerm(term="LoRA", pattern=r"lora", definition="Low-rank adapters."),
    )
    kb = build_knowledge_base(catalog, (), glossary)
    terms = {r.template: [t.term for t in r.terms] for r in kb.records}
    assert terms["MLA only works with naive serde mode.."] == ["MLA"]
    assert terms["Unknown backend {name}"] == []


def test_a_local_copy_of_a_setting_is_read_through(annotate):
    notes, _ = annotate
    (solution,) = notes["Blocks of more than 64 tokens are not supported here"].solutions
    assert solution.startswith("Make `--block-size` (`CacheConfig.block_size`) at most `64`")


def test_an_attribute_set_from_a_setting_in_the_class_reaches_its_flag(annotate):
    notes, catalog = annotate
    assert [(f.cls, f.attr, f.value) for f in catalog.attributes] == [
        ("vllm.attention.select.Pool", "tokens", "vllm_config.cache_config.block_size")]
    (solution,) = notes["A pool cannot hold blocks of more than 128 tokens"].solutions
    assert solution.startswith("Make `--block-size` (`CacheConfig.block_size`) at most `128`")


def test_early_returns_become_the_valid_choices(annotate):
    notes, _ = annotate
    a = notes["Unknown backend {name}"]
    # `name` is the function's parameter: what feeds it is not followed yet, and vLLM's variable is no lever.
    assert a.solutions == ()


def test_internal_errors_get_no_solutions(annotate):
    notes, _ = annotate
    a = notes["This line should be unreachable."]
    assert a.kind == "internal" and a.solutions == () and "bug in vLLM" in a.meaning


def test_every_example_fix_parses(annotate):
    notes, _ = annotate
    fixes = [a.example_fix for a in notes.values() if a.example_fix]
    assert fixes
    for fix in fixes:
        for text in (fix.before, fix.after):
            if fix.language == "python":
                ast.parse(text)
            else:
                assert shlex.split(text)[0] in ("vllm", "VLLM_MLA_DISABLE=1") or "=" in shlex.split(text)[0]


def test_report_counts_the_solutions_that_name_a_lever(annotate):
    from vllm_errors.cli import coverage_lines
    from vllm_errors.knowledge import build_knowledge_base

    _, catalog = annotate
    kb = build_knowledge_base(catalog, (derived_annotator(catalog),), ())
    levers = [line for line in coverage_lines(kb) if line.startswith("solutions naming a lever")]
    flags = sum(1 for r in kb.records if any("`--" in s for s in r.annotation.solutions))
    envs = sum(1 for r in kb.records if any(re.search(r"`VLLM_[A-Z]", s) for s in r.annotation.solutions))
    assert flags >= 1 and envs >= 1
    assert levers == [f"solutions naming a lever a user holds: {flags + envs} of {len(kb.records)} ({(flags + envs) / len(kb.records):.1%}): "
                      f"{flags} flag, 0 key of a JSON flag, {envs} environment variable, 0 key of the checkpoint's config.json, 0 request field, "
                      "0 the checkpoint itself, 0 option of another command"]


def test_a_reraise_points_at_what_it_passes_on_and_a_stub_gets_one_solution(annotate):
    _, catalog = annotate
    derive = derived_annotator(catalog)
    by_function = {e.sites[0].function: derive(e) for e in catalog.errors}
    # the OSError itself goes on: it is the traceback's last line, no "read the error printed above"
    assert by_function["rerun"].solutions == (REPASSED,) and by_function["rerun"].kind == "environment"
    # A stub: whether a class vLLM picks lacks it is the whole program's question; a plugin's class is its author's.
    stub = by_function["Runner.step"]
    assert stub.kind == "abstract" and len(stub.solutions) == 1 and stub.solutions[0].startswith("If the class in use is your own")
    assert "`step`" in stub.solutions[0] and "`Runner`" in stub.solutions[0] and "has no implementation here" in stub.meaning and "super().step" in stub.meaning


KINDS = {
    "vllm/engine/loop.py": """
        import asyncio

        def drain(queue):
            if queue.closed:
                raise StopIteration
            raise asyncio.CancelledError("the request was aborted")

        def load_extra():
            raise ImportError("Please install widgets[audio] for audio support")

        def open_weights(path):
            if not path.exists():
                raise FileNotFoundError(f"No weights at {path}")

        def check(x):
            try:
                x.run()
            except ValueError as e:
                if x.strict:
                    raise RuntimeError(f"Run failed: {e}") from e
        """,
}


def test_kinds_say_what_the_user_does_about_an_error():
    scans = [scan_module(path, textwrap.dedent(code).encode()) for path, code in KINDS.items()]
    catalog = build_catalog(SNAP, scans, len(scans))
    derive = derived_annotator(catalog)
    by = {(e.exception.rpartition(".")[2], e.sites[0].function): derive(e) for e in catalog.errors}
    assert by[("StopIteration", "drain")].kind == by[("CancelledError", "drain")].kind == "control"
    assert by[("StopIteration", "drain")].solutions == () and "no failure in itself" in by[("StopIteration", "drain")].meaning
    assert by[("ImportError", "load_extra")].kind == by[("FileNotFoundError", "open_weights")].kind == "environment"
    assert "the machine vLLM runs on" in by[("ImportError", "load_extra")].meaning
    # A condition under a handler reads as one sentence: "Raised while handling ...; and when ..."
    (trigger,) = by[("RuntimeError", "check")].triggers
    assert trigger.startswith("Raised while handling `ValueError`; the original error is chained as its cause (`e`); and when `x.strict`")


# The program model (extractor/facts.py, extractor/program.py): what callers pass for a parameter the guard reads.
CALLERS = {
    "vllm/config/model.py": '''
        from vllm.config.utils import config

        @config
        class ModelConfig:
            hf_config: object = None
            """The model's Hugging Face config."""

            def get_cache_config(self) -> "CacheConfig | None":
                return None
    ''',
    "vllm/entrypoints/protocol.py": '''
        from pydantic import BaseModel

        class OpenAIBaseModel(BaseModel):
            pass

        class VLLMValidationError(ValueError):
            """An error of a request, answered with a 400. More words."""

        class CompletionRequest(OpenAIBaseModel):
            max_tokens: int | None = None
            echo: bool = False

            @model_validator(mode="before")
            @classmethod
            def check_echo(cls, data):
                if data.get("echo") and data.get("stream_options"):
                    raise VLLMValidationError("echo cannot be streamed")
                return data

        def check_tokens(tokens, limit):
            if len(tokens) > limit:
                raise VLLMValidationError("Too many tokens for the limit", parameter="max_tokens", value=len(tokens))
            if not tokens:
                raise VLLMValidationError("No tokens in the batch", parameter="batch", value=tokens)

        MAX_STOPS = 8

        class SamplingParams:
            top_k: int = 0
            min_p: float = 0.0
            stop: list[str] | None = None

            def _verify_stops(self):
                n = len(self.stop)
                if n > MAX_STOPS:
                    raise ValueError("At most 8 stop strings")

            def _verify(self):
                if self.min_p > 1:
                    raise ValueError("min_p must be at most 1")

        def serve(request: CompletionRequest, params: "SamplingParams | None", other):
            if request.max_tokens > 4096:
                raise ValueError("Ask for at most 4096 tokens")
            if params.top_k < 0:
                raise ValueError("top_k must not be negative")
            if other.max_tokens > 4096:
                raise ValueError("Other object's limit")
    ''',
    "vllm/worker/spec.py": '''
        from dataclasses import dataclass

        @dataclass
        class LayerSpec:
            block: int
            name: str = ""

        def make_spec(vllm_config):
            return LayerSpec(block=vllm_config.cache_config.block_size, name="layer")

        def check_spec(spec: LayerSpec):
            if spec.block > 512:
                raise ValueError("Layer specs hold at most 512 tokens")
            if not spec.name:
                raise ValueError("Layer specs need a name")
    ''',
    "vllm/worker/stops.py": '''
        from vllm.entrypoints.protocol import MAX_STOPS, SamplingParams

        def add(params: SamplingParams):
            if len(params.stop) > MAX_STOPS:
                raise ValueError("Too many stops for the worker")
    ''',
    "vllm/worker/sampler_probe.py": '''
        import logging

        logger = logging.getLogger(__name__)


        def _fast_sampler(x):
            if not x.kernels:
                raise RuntimeError("The fast sampling kernel is missing on this machine")

        def make_sampler(x):
            try:
                return _fast_sampler(x)
            except RuntimeError as err:
                logger.warning("Fast sampling is unavailable (%s). Falling back to the slow sampler.", err)

        def make_sampler_again(x):
            try:
                return _fast_sampler(x)
            except Exception as err:
                logger.warning(f"Fast sampling is unavailable ({err}). Falling back to the slow sampler.")
                return None
    ''',
    "vllm/worker/blocks.py": '''
        import os
        from abc import ABC, abstractmethod


        def check_size(block_size):
            if block_size > 256:
                raise ValueError("A worker cannot use blocks of more than 256 tokens")

        class Worker:
            def __init__(self, vllm_config):
                check_size(vllm_config.cache_config.block_size)

        def check_twice(size):
            if size > 512:
                raise ValueError("Blocks past 512 tokens")

        def first(vllm_config):
            check_twice(vllm_config.cache_config.block_size)

        def second():
            check_twice(7)

        def experts(model_config):
            if model_config.hf_config.num_experts > 8:
                raise ValueError("At most 8 experts here")

        class Layer:
            def __init__(self, size):
                if size > 2048:
                    raise ValueError("Layers of more than 2048 tokens")
                self.size = size

        def offline(repo):
            if os.environ.get("HF_HUB_OFFLINE") == "1":
                raise ValueError("Cannot download a model in offline mode")

        def undeclared():
            if os.getenv("VLLM_NOT_IN_ENVS"):
                raise ValueError("An undeclared VLLM_ variable is set")

        def _probe(x):
            if x.size > 3:
                raise ValueError("The probe failed on a large input")

        def run_probe(x):
            try:
                _probe(x)
            except (ValueError, KeyError):
                print("probe failed")

        def run_probe_again(x):
            try:
                _probe(x)
            except Exception:
                return None

        def _strict(x):
            if x < 0:
                raise ValueError("Strict check of a negative value")

        def call_strict(x):
            try:
                _strict(x)
            except ValueError:
                raise

        def warm_up(vllm_config, manager):
            if vllm_config.cache_config.block_size > 16:
                assert manager is not None, "the manager is made before"

        def pick_blocks(model_config):
            cache = model_config.get_cache_config()
            if cache.block_size > 128:
                raise ValueError("Picked blocks of more than 128 tokens")

        def tune(x):
            if x.mode == "fast":
                raise RuntimeError(f"Fast mode needs small blocks. Pass --block-size 16, or drop --turbo-mode {x.mode}.")

        def _slots(size, blocks):
            if size <= 0:
                raise ValueError("Slot size must be positive")

        def slots(vllm_config, blocks):
            size = vllm_config.cache_config.block_size
            if size > 0 and blocks:
                _slots(size, blocks)

        def more_slots(n):
            assert n > 0
            _slots(n, [])

        def _rows(n):
            if n <= 0:
                raise ValueError("Row count must be positive")

        def rows(n):
            if n > 0:
                _rows(n)
            _rows(n)

        def check_sizes(vllm_config):
            for size in vllm_config.cache_config.block_size:
                assert size > 0, "Every size must be positive"

        def count_items(xs):
            seen = 0
            for x in xs:
                seen += 1
            a, limit = 1, 64
            if seen > limit:
                raise ValueError("Too many items counted")

        class Stepper(ABC):
            @abstractmethod
            def step(self):
                raise NotImplementedError

            @staticmethod
            @abstractmethod
            def layout():
                raise NotImplementedError

        def check_sizes_given(sizes):
            if isinstance(sizes, str):
                raise ValueError("Size strings should be handled before this step")

        class Half(Mixin):
            @abstractmethod
            def run(self):
                raise NotImplementedError

        class Loader:
            def load_weights(self, x):
                self._check_shape(x)

            def _check_shape(self, x):
                if x.ndim != 2:
                    raise ValueError("Weights must be 2-D")

        class Store:
            def exists(self):
                if self.broken:
                    raise RuntimeError("Store is broken")

        def peek(store):
            store.exists()  # any object's exists(): not surely Store's

        def load_model(store):
            peek(store)

        class Backend(BackendBase):
            def get_impl(self):
                raise NotImplementedError

        class FastBackend(Backend):
            def other(self):
                return 1

        class Plugin(BackendBase):
            def run_plugin(self):
                raise NotImplementedError

        class MyPlugin(Plugin):
            def run_plugin(self):
                return 1

        def pick_cache(vllm_config):
            dtype = vllm_config.cache_config.cache_dtype
            if dtype == "auto":
                return 1
            elif dtype == "fp8":
                return 2
            else:
                raise ValueError("No kernel for this cache dtype here")

        def build(vllm_config):
            if vllm_config.cache_config.block_size > 0:
                return Layer(vllm_config.cache_config.block_size)

        def split_blocks(vllm_config, total):
            size = vllm_config.cache_config.block_size
            if total % size != 0:
                raise ValueError("Tokens must split into whole blocks")
            if size % total != 0:
                raise ValueError("Blocks must hold whole groups")

        def needs_cache(vllm_config):
            if vllm_config.cache_config is None:
                raise ValueError("A cache config is needed here")

        def copied(vllm_config):
            vllm_config = replace(vllm_config, load_config=None)
            if vllm_config.cache_config.block_size > 256:
                raise ValueError("A copied config keeps blocks of at most 256 tokens")

        def recached(vllm_config):
            vllm_config = replace(vllm_config, cache_config=None)
            if vllm_config.cache_config.block_size > 128:
                raise ValueError("A recached config keeps blocks of at most 128 tokens")

        class Probe:
            def __init__(self, n):
                if n > 9:
                    raise ValueError("Probes take at most 9")

        def make_probe(vllm_config, n):
            if vllm_config.cache_config.cache_dtype == "fp8":
                return Probe(n)

        def rearrange(experts):
            if experts > 64:
                raise RuntimeError("Rearranging more than 64 experts")

        def step_experts(vllm_config, experts):
            if vllm_config.cache_config.cache_dtype == "fp8":
                rearrange(experts)

        def load_all(loader):
            try:
                loader.load()
            except torch.cuda.OutOfMemoryError as e:
                logger.error("Out of memory while loading. Try a smaller --block-size, or more GPUs.")
                raise e

        def store_config():
            path = os.getenv("STORE_CONFIG_PATH")
            if not path:
                raise ValueError("The store needs a config file")
            return path
    ''',
    "vllm/model_executor/layers/mixer.py": '''
        from vllm.kernels.ops.scan import ScanKernel


        def mix(weight, x):
            if weight.shape[1] != x.shape[0]:
                raise ValueError("Mixer weight and input disagree")
            return ScanKernel(len(x), 4)


        def mix_batch(weight, xs):
            return [mix(weight, x) for x in xs]


        def mix_request(request, x):
            if request.embeds.shape[0] != x.shape[0]:
                raise ValueError("Request embeds and input disagree")
            return x


        def unused_mix(w):
            if w.dim() != 2:
                raise ValueError("Unused weight must be 2-D")
            return w


        def serve_mix(request, x):
            return mix_request(request, x)
    ''',
    "vllm/kernels/ops/tool_only.py": '''
        def tool_kernel(x, block):
            if block % 16:
                raise ValueError("Tool kernel got a ragged block")
    ''',
    "vllm/kernels/ops/scan.py": '''
        HAS_TRITON = False


        def has_deep_ep():
            return False


        def dispatch(x, has_prefill):
            if not has_deep_ep():
                raise RuntimeError("Dispatch needs DeepEP")
            if has_prefill and x is None:
                raise RuntimeError("Prefill dispatch needs an input")
            return launch(x, "triton")


        def relaunch(x, name):
            return launch(x, name)


        def launch(x, backend):
            if backend not in ("triton", "fused"):
                raise ValueError("Unknown scan backend")
            if not HAS_TRITON:
                raise RuntimeError("Scan launch needs Triton")
            return x


        class ScanKernel:
            _ready = None

            def __init__(self, rows, split):
                if rows * split > 448:
                    raise ValueError("Scan tile does not fit")
                self.rows = rows

            @classmethod
            def instance(cls):
                if cls._ready is None:
                    raise RuntimeError("Scan kernels were never set up")
                return cls._ready
    ''',
    "vllm/transformers_utils/configs/dory.py": '''
        from transformers import PreTrainedConfig


        class DoryConfig(PreTrainedConfig):
            def __init__(self, projector_act="gelu", _scratch=None, **kwargs):
                if projector_act != "gelu":
                    raise ValueError(f"Dory projects with gelu only, not {projector_act}")
                self.window = kwargs.get("window", 0)
                super().__init__(**kwargs)

            def validate_window(self):
                if self.window <= 0:
                    raise ValueError("Dory needs a positive window")
                if self.projector is None:
                    raise ValueError("Dory needs a projector")


        class Plain:
            def __init__(self, act):
                if act != "gelu":
                    raise ValueError("Plain projects with gelu only")
    ''',
}


@pytest.fixture(scope="module")
def program_catalog():
    sources = {path: textwrap.dedent(code).encode() for path, code in sorted({**FIXTURE, **CALLERS}.items())}
    scans = [scan_module(path, code) for path, code in sources.items()]
    program = Program({path: file_facts(path, code) for path, code in sources.items()})
    return replace(build_catalog(SNAP, scans, len(scans)), program=program)


@pytest.fixture(scope="module")
def annotate_program(program_catalog):
    derive = derived_annotator(program_catalog)
    return {e.template: derive(e) for e in program_catalog.errors}


def test_a_parameter_is_the_setting_every_caller_passes(annotate_program):
    (solution,) = annotate_program["A worker cannot use blocks of more than 256 tokens"].solutions
    assert solution.startswith("Make `--block-size` (`CacheConfig.block_size`) at most `256`")
    assert "it reaches this code as a parameter: `Worker.__init__` passes `vllm_config.cache_config.block_size` (vllm/worker/blocks.py:12)" in solution


def test_a_parameter_that_one_caller_sets_itself_is_no_setting(annotate_program):
    assert annotate_program["Blocks past 512 tokens"].solutions == ()


def test_a_field_of_the_checkpoint_config_is_a_key_of_config_json(annotate_program):
    (solution,) = annotate_program["At most 8 experts here"].solutions
    assert solution.startswith("Make `num_experts` in the model's `config.json` (or `--hf-overrides`) at most `8`")


def test_a_constructor_parameter_is_followed_to_the_class_call(annotate_program):
    (solution,) = annotate_program["Layers of more than 2048 tokens"].solutions
    assert solution.startswith("Make `--block-size` (`CacheConfig.block_size`) at most `2048` (it reaches this code as a parameter: `build` passes")
    assert annotate_program["Unknown backend {name}"].solutions == ()  # nobody calls dispatch: nothing to follow


def test_a_config_a_method_is_annotated_to_return_is_read_through(annotate_program):
    (solution,) = annotate_program["Picked blocks of more than 128 tokens"].solutions
    assert solution.startswith("Make `--block-size` (`CacheConfig.block_size`) at most `128`")


def test_a_flag_the_message_names_is_its_advice_when_the_guard_reaches_none(annotate_program):
    a = annotate_program["Fast mode needs small blocks. Pass --block-size 16, or drop --turbo-mode {x.mode}."]
    assert a.kind == "user"
    (solution,) = a.solutions  # the first sentence names no flag; --turbo-mode is no flag of this release
    assert solution.startswith("Do what the message says: “Pass `--block-size` 16, or drop ") and "…" in solution
    assert solution.endswith("” (`--block-size` (`CacheConfig.block_size`) (default `16`)).") and "`--turbo-mode`" not in solution


def test_a_check_every_caller_makes_first_is_internal(annotate_program):
    a = annotate_program["Slot size must be positive"]
    assert a.kind == "internal" and a.solutions == ()
    assert "Every call of `_slots` in vLLM runs only where this check passes (`slots` (vllm/worker/blocks.py:" in a.meaning
    assert "`more_slots` (vllm/worker/blocks.py:" in a.meaning
    # one of the calls does not check first: the check may fire through it
    assert annotate_program["Row count must be positive"].kind != "internal"


def test_a_field_of_a_request_parameter_is_a_lever(annotate_program):
    assert annotate_program["Ask for at most 4096 tokens"].solutions == (
        "Make the request field `max_tokens` (`CompletionRequest`) at most `4096`.",)
    assert annotate_program["top_k must not be negative"].solutions == (
        "Make `SamplingParams.top_k` (the request's `top_k`) at least `0`.",)
    assert annotate_program["Other object's limit"].solutions == ()  # no annotation: nothing says it is a request
    # in a method of the request's own class, `self.min_p` is the field
    assert annotate_program["min_p must be at most 1"].solutions == ("Make `SamplingParams.min_p` (the request's `min_p`) at most `1`.",)


def test_an_assert_on_each_item_of_a_setting_is_the_users(annotate_program):
    a = annotate_program["Every size must be positive"]
    assert a.kind == "user"
    assert a.solutions[0] == "Make each item of `--block-size` (`CacheConfig.block_size`) above `0`."


def test_where_a_local_comes_from_is_said_as_its_statement_allows(annotate_program):
    (trigger,) = annotate_program["Too many items counted"].triggers
    assert "`limit` is set by `64`." in trigger and "1, 64" not in trigger  # one name of a tuple, its own value


def test_an_abstract_method_of_an_abc_is_reached_only_through_super(program_catalog):
    derive = derived_annotator(program_catalog)
    stub = [derive(e) for e in program_catalog.errors if e.sites[0].function == "Stepper.step"]
    loose = [derive(e) for e in program_catalog.errors if e.sites[0].function == "Half.run"]
    assert len(stub) == 1 and "It is an abstract method: no class without its own `step` can be made" in stub[0].meaning
    assert stub[0].solutions[0].endswith("its `step` must not call `super().step`: `Stepper` has no implementation of it.")
    # @abstractmethod binds only in a class built on ABC: Half's can be left out
    assert len(loose) == 1 and "It is reached when the object in use does not override `run`" in loose[0].meaning
    # a static method is called on a class, which need not be made: no claim that only super() reaches it
    (static,) = [derive(e) for e in program_catalog.errors if e.sites[0].function == "Stepper.layout"]
    assert "no class without its own" not in static.meaning and "does not override `layout`" in static.meaning


def test_a_message_that_says_a_case_should_be_handled_earlier_is_internal(annotate_program):
    assert annotate_program["Size strings should be handled before this step"].kind == "internal"


def test_a_checkpoint_key_the_code_needs_is_a_choice_of_checkpoint_not_a_key_to_leave_out(annotate_program):
    # the user picks the checkpoint: one that gives the key a value; leaving a key out is never offered (the model's design)
    assert annotate_program["Dory needs a projector"].solutions == (
        "Use a checkpoint whose `config.json` gives `projector` a value (this code needs it; the one in use leaves it out).",)
    assert not any("Leave" in s and "config.json" in s for a in annotate_program.values() for s in a.solutions)


def test_when_vllm_runs_a_check_is_said_from_the_functions_that_reach_it(annotate_program):
    # its only call is made as weights load: the meaning says it runs then (not a situation beside it)
    assert "It runs while vLLM loads the model's weights (at startup, and again where weights are reloaded): vLLM calls it from " \
           "`Loader.load_weights` (vllm/worker/blocks.py:" in annotate_program["Weights must be 2-D"].meaning
    assert annotate_program["Weights must be 2-D"].situations == ()
    assert annotate_program["Store is broken"].situations == ()  # `store.exists()` may be any object's


def test_a_stub_no_class_built_on_it_overrides_is_a_missing_feature_not_an_abstract_method(program_catalog):
    derive = derived_annotator(program_catalog)
    (missing,) = [derive(e) for e in program_catalog.errors if e.sites[0].function == "Backend.get_impl"]
    (left,) = [derive(e) for e in program_catalog.errors if e.sites[0].function == "Plugin.run_plugin"]
    assert missing.kind == "unknown" and "No class vLLM builds on `Backend` provides its own `get_impl`" in missing.meaning
    assert left.kind == "abstract"  # MyPlugin provides its own


def test_an_example_fix_starts_from_a_value_that_raises(annotate_program):
    fix = annotate_program["No kernel for this cache dtype here"].example_fix
    assert fix.before == "vllm serve MODEL --kv-cache-dtype bfloat16"  # "fp8" is a way out too: it would not raise


def test_an_assert_in_a_branch_a_setting_picks_is_internal_with_a_way_around(annotate_program):
    a = annotate_program["the manager is made before"]
    assert a.kind == "internal"  # the setting picks the branch; the check itself is vLLM's own
    assert a.solutions == ("Until it is fixed, a way around it: make `--block-size` (`CacheConfig.block_size`) at most `16` (default `16`).",)


def test_report_counts_levers_by_type_and_those_reached_through_callers(program_catalog):
    from vllm_errors.cli import coverage_lines

    kb = build_knowledge_base(program_catalog, (derived_annotator(program_catalog),), ())
    lines = coverage_lines(kb)
    # (the checkpoint itself: Dory's projector, which a checkpoint must give)
    assert any(line.endswith("3 key of the checkpoint's config.json, 7 request field, 1 the checkpoint itself, 0 option of another command")
               for line in lines)
    # (the request fields: max_tokens and top_k, min_p, the two counts of stop, and the validation errors: echo, the
    # max_tokens a raise names)
    # the worker's and the layer's size checks, and the layer spec's made from a setting; the assert's way around reads the
    # setting in its own function
    assert any(line.startswith("of those, reached through what the callers pass for a parameter: 3; quoting the message's own advice: 1;")
               and line.endswith(f"every call in vLLM catches it: 2 ({2 / len(kb.records):.1%}); every call wraps it in another error: 0; "
                               "its own `try` block takes it: 0; found by the line vLLM logs in its place: 1") for line in lines)


def test_an_environment_variable_read_directly_is_a_lever(annotate_program):
    a = annotate_program["Cannot download a model in offline mode"]
    assert a.kind == "user" and a.solutions == ('Use a value of the environment variable `HF_HUB_OFFLINE` other than `"1"`.',)
    # a variable read as a string is set or empty, not on or off
    assert annotate_program["The store needs a config file"].solutions == (
        "Set the environment variable `STORE_CONFIG_PATH` to a value that is not empty.",)
    # a VLLM_* name is a lever only where vllm/envs.py declares it: the pages never name a variable vLLM does not have
    assert annotate_program["An undeclared VLLM_ variable is set"].solutions == ()


def test_an_error_every_caller_catches_says_so_with_the_handlers(annotate_program):
    meaning = annotate_program["The probe failed on a large input"].meaning
    assert meaning.endswith("Where vLLM calls `_probe`, it catches this error (`run_probe` catches `ValueError` (vllm/worker/blocks.py:49); "
                            "`run_probe_again` catches `Exception` (vllm/worker/blocks.py:55)): it is handled there, and what you see is "
                            "what that handler logs or returns, unless your own code calls the function.")
    # a handler that raises again catches nothing
    assert "catches" not in annotate_program["Strict check of a negative value"].meaning
    assert annotate_program["The probe failed on a large input"].logged == ()  # a print is no log line


def test_an_error_every_caller_catches_and_logs_says_what_the_user_sees_and_is_looked_up_by_it(annotate_program, program_catalog):
    a = annotate_program["The fast sampling kernel is missing on this machine"]
    # both handlers log the same line, by %-formatting and by an f-string: said once, as the user reads it
    assert a.meaning.endswith("it is handled there, and vLLM logs WARNING `Fast sampling is unavailable ({err}). Falling back to the "
                              "slow sampler.` in its place, unless your own code calls the function.")
    assert a.logged == ("Fast sampling is unavailable ({err}). Falling back to the slow sampler.",)
    from vllm_errors.lookup import answer, build_index, read_paste

    kb = build_knowledge_base(program_catalog, (derived_annotator(program_catalog),), ())
    paste = "WARNING 12-01 10:00:00 [sampler_probe.py:15] Fast sampling is unavailable (no kernel). Falling back to the slow sampler."
    found = answer(build_index(kb), read_paste(paste))
    assert found.kind == "vllm" and found.finding.matches[0].title.endswith("The fast sampling kernel is missing on this machine")


def test_a_check_of_tensors_vllm_builds_is_internal_when_vllm_calls_it(annotate_program):
    a = annotate_program["Mixer weight and input disagree"]
    assert a.kind == "internal" and a.solutions == ()
    assert "What it checks is the shape, type or layout of the tensors the function is given (called from " \
           "`mix_batch` (vllm/model_executor/layers/mixer.py:" in a.meaning
    assert annotate_program["Request embeds and input disagree"].kind == "unknown"  # the request's tensor: handed in
    assert annotate_program["Unused weight must be 2-D"].kind == "unknown"  # nothing in vLLM calls it: a plugin may


def test_a_check_in_a_kernel_wrapper_vllm_calls_is_internal(annotate_program):
    a = annotate_program["Scan tile does not fit"]
    assert a.kind == "internal"
    assert "what the code that prepares a GPU kernel (`vllm/kernels/ops/scan.py`) is given" in a.meaning
    assert "called from `mix` (vllm/model_executor/layers/mixer.py:" in a.meaning
    assert annotate_program["Scan kernels were never set up"].kind == "unknown"  # an object's state, not what it is given
    # a choice by name: names come from settings (one call passes a literal the check accepts, another a name)
    assert annotate_program["Unknown scan backend"].kind == "unknown"
    assert annotate_program["Scan launch needs Triton"].kind != "internal"  # what the machine has installed
    # a kernel no file of vLLM imports: only tools outside the package run it, with values vLLM does not derive
    assert annotate_program["Tool kernel got a ragged block"].kind != "internal"


def test_a_field_of_a_checkpoint_config_class_is_a_key_of_config_json(annotate_program):
    a = annotate_program["Dory projects with gelu only, not {projector_act}"]
    assert a.kind == "user"
    # not `--hf-overrides`: vLLM applies those to the config object after it is built and checked
    assert a.solutions == ("Set `projector_act` in the model's `config.json` to `\"gelu\"`.",)
    assert annotate_program["Dory needs a positive window"].solutions[0].startswith("Make `window` in the model's `config.json` above `0`")
    assert annotate_program["Plain projects with gelu only"].solutions == ()  # not a checkpoint's config: no key


def test_a_check_of_what_the_machine_has_is_the_environments(annotate_program):
    a = annotate_program["Dispatch needs DeepEP"]
    assert a.kind == "environment"
    assert "What it checks is what this machine has installed or attached (`has_deep_ep`), not a setting" in a.meaning
    assert annotate_program["Scan launch needs Triton"].kind == "environment"  # `HAS_TRITON`
    assert annotate_program["Prefill dispatch needs an input"].kind != "environment"  # a local flag, not the machine


def test_the_meaning_says_where_vllm_calls_the_function(annotate_program):
    assert annotate_program["A worker cannot use blocks of more than 256 tokens"].meaning.endswith(
        "vLLM calls `check_size` from `Worker.__init__` (vllm/worker/blocks.py:12).")
    assert "vLLM calls" not in annotate_program["The store needs a config file"].meaning  # nothing in vLLM calls it


def test_a_config_that_no_flag_sets_whole_is_no_setting(annotate_program):
    a = annotate_program["A cache config is needed here"]  # `vllm_config.cache_config is None`: vLLM builds it
    assert a.solutions == () and "settings you control" not in a.meaning


def test_divisibility_by_a_setting_is_said_as_a_value_that_divides(annotate_program):
    assert annotate_program["Tokens must split into whole blocks"].solutions == (
        "Use a value of `--block-size` (`CacheConfig.block_size`) that divides `total` (default `16`).",)
    assert annotate_program["Blocks must hold whole groups"].solutions == (
        "Use a value of `--block-size` (`CacheConfig.block_size`) that is a multiple of `total` (default `16`).",)



def test_a_raise_no_condition_guards_leaves_the_decision_to_what_comes_before(annotate_program):
    (trigger,) = annotate_program["Row count must be positive"].triggers or ("",)
    (unguarded,) = [t for e, a in annotate_program.items() for t in a.triggers if "reaches line" in t][:1]
    # "no condition guards it" is untrue of a raise after a loop that returns when it finds something
    assert "no `if` or `assert` around the raise guards it" in unguarded and "what returns or raises before that line" in unguarded
    assert "reaches line" not in trigger


def test_a_copy_of_a_config_keeps_the_settings_it_does_not_replace(annotate_program):
    (solution,) = annotate_program["A copied config keeps blocks of at most 256 tokens"].solutions
    assert solution.startswith("Make `--block-size` (`CacheConfig.block_size`) at most `256`")
    assert annotate_program["A recached config keeps blocks of at most 128 tokens"].solutions == ()  # replaced: not the flag's


def test_a_validation_error_is_the_requests_with_the_field_it_names(annotate_program):
    # a validator handed the request's JSON before it is parsed reads the request's fields by key
    page = annotate_program["echo cannot be streamed"]
    assert page.kind == "user" and page.solutions[0] == (
        "Leave the request field `echo` (`CompletionRequest`) unset, or give it an empty, zero or false value.")
    assert "Pydantic runs this check as it validates a `CompletionRequest`, and reports it inside a `ValidationError` for " \
        "`CompletionRequest`, after `Value error,`." in page.meaning
    page = annotate_program["Too many tokens for the limit"]
    assert page.kind == "user"  # VLLMValidationError is made for what a request gets wrong
    # what vLLM says of its own exception class: its first sentence
    assert "vLLM's documentation of `VLLMValidationError`: “An error of a request, answered with a 400\\.”" in page.meaning
    assert page.solutions == ("Change the request field `max_tokens`, or leave it out: it is the one this error rejects (the raise "
                              "names it).",)
    assert annotate_program["No tokens in the batch"].solutions == ()  # `batch` is no field of any request model


def test_what_vllm_logs_before_it_raises_again_is_the_advice(program_catalog):
    derive = derived_annotator(program_catalog)
    (error,) = [e for e in program_catalog.errors if e.sites[0].function == "load_all"]
    page = derive(error)
    assert page.kind == "environment"  # out of memory: what the machine has
    (solution,) = page.solutions
    assert solution.startswith("Do what vLLM logs as it raises this: “Try a smaller `--block-size`, or more GPUs\\.” (`--block-size`")


def test_a_count_of_a_setting_against_a_constant_names_both(annotate_program):
    page = annotate_program["At most 8 stop strings"]
    assert page.solutions == ("Make the number of items in `SamplingParams.stop` (the request's `stop`) at most `MAX_STOPS` (`8`).",)
    assert re.search(r"`MAX_STOPS` is `8` \(vllm/entrypoints/protocol\.py:\d+\)\.", page.triggers[0])
    assert page.meaning.count("`SamplingParams.stop`") == 1  # the setting once, not also as "the number of items in" it
    # a constant imported from another module is that module's
    assert "`MAX_STOPS` is `8` (vllm/entrypoints/protocol.py:" in annotate_program["Too many stops for the worker"].triggers[0]


def test_a_field_of_an_object_every_construction_fills_from_a_setting_is_that_setting(annotate_program):
    (solution,) = annotate_program["Layer specs hold at most 512 tokens"].solutions
    assert solution.startswith("Make `--block-size` (`CacheConfig.block_size`) at most `512` (it reaches this code as a parameter: "
                               "`LayerSpec` is made with `block=vllm_config.cache_config.block_size` (vllm/worker/spec.py:")
    assert annotate_program["Layer specs need a name"].solutions == ()  # made with a literal: no setting


def test_a_constructor_is_not_said_to_run_only_under_its_callers_settings(annotate_program):
    # Probe(...) is made only where the cache dtype is fp8 in the fixture, but objects are also made by factories no name
    # links (`cls(...)`, `from_pretrained`)
    page = annotate_program["Probes take at most 9"]
    assert "Every call of `__init__`" not in page.meaning and not any("way around" in s for s in page.solutions)


def test_a_setting_every_call_is_made_under_is_a_way_around(annotate_program):
    page = annotate_program["Rearranging more than 64 experts"]
    assert ("Every call of `rearrange` in vLLM is made only where `vllm_config.cache_config.cache_dtype == 'fp8'` holds, which "
            "`--kv-cache-dtype` (`CacheConfig.cache_dtype`) decides (`step_experts` (vllm/worker/blocks.py:") in page.meaning
    (solution,) = page.solutions
    assert solution.startswith("A way around it: use a value of `--kv-cache-dtype` (`CacheConfig.cache_dtype`) other than `'fp8'`")
    assert solution.endswith("vLLM calls `rearrange` only where `vllm_config.cache_config.cache_dtype == 'fp8'` holds.")


# What a page can say beyond the raising function: the checkpoint's tensors a weight loader is handed, the `try`
# block whose failure a handler reports or passes on, and the command whose options a benchmark's checks read.
REACH = {
    "vllm/models/toy.py": '''
        class ToyForCausalLM:
            def load_weights(self, weights):
                for name, tensor in weights:
                    part = tensor[0]
                    if part.shape[0] != self.hidden_size:
                        raise ValueError(f"Tensor {name} does not fit the toy model")
                    if self.frozen:
                        raise RuntimeError("The toy model is frozen")

            def draft(self):
                if self.head is None:
                    raise ValueError(f"{self.name} has no draft head. Use a checkpoint that includes one.")
    ''',
    "vllm/distributed/control.py": '''
        class ControlServer:
            def start(self, address):
                try:
                    self.socket.bind(address)
                    len(address)
                except OSError as e:
                    raise RuntimeError(f"The control server could not bind {address}") from e

            def open(self):
                try:
                    self.setup_agent()
                except Exception:
                    self.shutdown()
                    raise

            def load_extra(self):
                try:
                    self.loader.load(self.extra)
                except OSError:
                    logger.error(f"Please install vllm[{self.extra}] for support")
                    raise

            def name_of(self, cls):
                try:
                    return self.names.lookup(cls)
                except KeyError:
                    raise TypeError("The class has no registered name") from None
    ''',
    "vllm/entrypoints/cli/benchmark/main.py": '''
        import vllm.entrypoints.cli.benchmark.serve
        import vllm.entrypoints.cli.benchmark.throughput

        class BenchmarkSubcommand:
            name = "bench"
    ''',
    "vllm/entrypoints/cli/benchmark/serve.py": '''
        from vllm.benchmarks.serve import add_cli_args, main

        class BenchmarkServingSubcommand:
            name = "serve"
    ''',
    "vllm/entrypoints/cli/benchmark/throughput.py": '''
        from vllm.benchmarks.throughput import add_cli_args, main

        class BenchmarkThroughputSubcommand:
            name = "throughput"
    ''',
    "vllm/benchmarks/serve.py": '''
        def add_cli_args(parser):
            parser.add_argument("--num-prompts", type=int, default=10)

        def main(args):
            if args.num_prompts < 1:
                raise ValueError("A serving benchmark needs at least one prompt")
    ''',
    "vllm/benchmarks/throughput.py": '''
        def add_cli_args(parser):
            parser.add_argument("--num-prompts", type=int, default=1000)
            parser.add_argument("--throughput-only", action="store_true")
    ''',
}


@pytest.fixture(scope="module")
def reach():
    return _derived(REACH)


def _catalog(files: dict[str, str]):
    """The catalog of a small release made of `files`, with its program model."""
    sources = {path: textwrap.dedent(code).encode() for path, code in sorted(files.items())}
    scans = [scan_module(path, code) for path, code in sources.items()]
    program = Program({path: file_facts(path, code) for path, code in sources.items()})
    return replace(build_catalog(SNAP, scans, len(scans)), program=program)


def _derived(files: dict[str, str]) -> dict:
    """The annotations of the errors of a small release made of `files`, with its program model, by template (or, for
    a raise without one, by function)."""
    catalog = _catalog(files)
    derive = derived_annotator(catalog)
    return {e.template or e.sites[0].function: derive(e) for e in catalog.errors}


def test_a_weight_loader_checking_the_checkpoint_tensors_is_the_users_checkpoint(reach):
    fits = reach["Tensor {name} does not fit the toy model"]
    assert fits.kind == "user"
    assert "a tensor of the model's checkpoint" in fits.meaning
    assert len(fits.solutions) == 1 and fits.solutions[0].startswith("Check the model's checkpoint")
    # a check of the model object's own state in the same loader says nothing of the checkpoint
    frozen = reach["The toy model is frozen"]
    assert "checkpoint" not in (frozen.meaning or "") and not any("checkpoint" in s for s in frozen.solutions)


def test_a_raise_in_a_handler_names_what_the_try_block_runs(reach):
    wrapped = reach["The control server could not bind {address}"]
    assert wrapped.kind == "environment"  # an OSError: a socket, a file, a process
    assert "what the `try` block before it runs (`self.socket.bind(…)`), caught by `except OSError` (line 7)" in wrapped.meaning
    assert "len(" not in wrapped.meaning  # a conversion says nothing of what was tried
    assert "The above exception was the direct cause" in wrapped.meaning


def test_a_bare_reraise_is_said_to_pass_the_error_on(reach):
    passed = reach["ControlServer.open"]
    assert passed.kind == "control"
    assert "passes on, unchanged, the exception that `except Exception` (line 13) caught" in passed.meaning
    assert "`self.setup_agent(…)`" in passed.meaning and "shutdown" not in passed.meaning  # the handler's cleanup is not what failed
    assert passed.solutions == (REPASSED,) and REPASSED.startswith("Look up the exception this passes on, not this line")


def test_a_benchmark_option_is_named_with_the_command_that_runs_the_check(reach):
    # `--num-prompts` is declared by two benchmarks; only `vllm bench serve` loads the raising file
    (solution,) = reach["A serving benchmark needs at least one prompt"].solutions
    assert solution == "Make the `--num-prompts` option of `vllm bench serve` at least `1`."
    assert reach["A serving benchmark needs at least one prompt"].kind == "user"


def test_a_sentence_of_the_message_that_tells_what_to_do_is_a_solution(reach):
    # no flag in it, but the author's advice to the reader: quoted; the sentence with a placeholder is no advice
    assert reach["{self.name} has no draft head. Use a checkpoint that includes one."].solutions == (
        "Do what the message says: “Use a checkpoint that includes one\\.”",)


RANGES = {
    "vllm/sampling_params.py": '''
        class SamplingParams:
            top_p: float = 1.0
            top_k: int = 0
            seed: int | None = None

            def _verify_args(self):
                if not 0.0 < self.top_p <= 1.0:
                    raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
                if not isinstance(self.top_k, int) or self.top_k < -1:
                    raise ValueError(f"top_k must be an integer of at least -1, got {self.top_k}.")
                if tuple(self.seed_list) != (1, 2):
                    raise ValueError("seed_list must be exactly 1, 2")
                if int(self.seed) < 0:
                    raise ValueError("seed must not be negative")
    ''',
}


def test_a_range_a_typed_bound_and_a_converted_setting_are_said_as_levers():
    said = {template: a.solutions for template, a in _derived(RANGES).items()}
    assert said["top_p must be in (0, 1], got {self.top_p}."] == (
        "Make `SamplingParams.top_p` (the request's `top_p`) above `0.0` and at most `1.0`.",)
    # `isinstance(x, int) and x >= -1`: the type is what the bound says of it already
    assert said["top_k must be an integer of at least -1, got {self.top_k}."] == (
        "Make `SamplingParams.top_k` (the request's `top_k`) at least `-1`.",)
    assert said["seed_list must be exactly 1, 2"] == ()  # `seed_list` is no field of the request: nothing to convert
    assert said["seed must not be negative"] == ("Make `SamplingParams.seed` (the request's `seed`) at least `0`.",)  # int(x) is x


CHECKPOINT_KEYS = {
    "vllm/config/model.py": CALLERS["vllm/config/model.py"],
    "vllm/config/vllm.py": '''
        from vllm.config.utils import config
        from vllm.config.model import ModelConfig

        @config
        class VllmConfig:
            model_config: ModelConfig = None
    ''',
    "vllm/model_executor/models/toyvl.py": '''
        class ToyVLForConditionalGeneration:
            def __init__(self, vllm_config):
                config = vllm_config.model_config.hf_config
                vision = config.vision_config
                if vision is None:
                    raise ValueError("ToyVL needs a vision config")
                if not isinstance(config.rope_scaling, dict):
                    raise ValueError("rope_scaling must be a mapping")
                if config.rope_scaling.get("type") not in ("linear", "yarn"):
                    raise ValueError("Unknown rope type")
    ''',
}


def test_a_checkpoint_key_the_code_needs_and_a_setting_of_the_wrong_type_are_levers():
    said = _derived(CHECKPOINT_KEYS)
    assert said["ToyVL needs a vision config"].kind == "user" and said["ToyVL needs a vision config"].solutions == (
        "Use a checkpoint whose `config.json` gives `vision_config` a value (this code needs it; the one in use leaves it out), "
        "or add it with `--hf-overrides`.",)  # read after vLLM applies the overrides, unlike a key a config class's __init__ checks
    assert said["Unknown rope type"].solutions == (  # a key of a dict the setting holds
        "Set `type` in `rope_scaling` in the model's `config.json` (or `--hf-overrides`) to one of `\"linear\"`, `\"yarn\"`.",)
    assert said["rope_scaling must be a mapping"].solutions == (
        "Give `rope_scaling` in the model's `config.json` (or `--hf-overrides`) a value of type `dict`.",)


QUANTIZED = {
    "vllm/model_executor/layers/quantization/base_config.py": '''
        class QuantizationConfig:
            @staticmethod
            def get_from_keys(config, keys):
                for key in keys:
                    if key in config:
                        return config[key]
                raise ValueError(f"Cannot find any of {keys} in the model's quantization config.")
    ''',
    "vllm/model_executor/layers/quantization/toyq.py": '''
        from vllm.model_executor.layers.quantization.base_config import QuantizationConfig

        class ToyQConfig(QuantizationConfig):
            @classmethod
            def from_config(cls, config):
                bits = cls.get_from_keys(config, ["bits", "w_bit"])
                if bits not in (4, 8):
                    raise ValueError(f"ToyQ supports 4 or 8 bits, not {bits}")
                if config.get("export") is None:
                    raise ValueError("ToyQ needs an export section")
    ''',
}


def test_a_key_of_the_quantization_config_from_config_is_handed_is_the_checkpoints():
    said = _derived(QUANTIZED)
    assert said["ToyQ supports 4 or 8 bits, not {bits}"].solutions == (
        "Set `bits` in the model's quantization config (the `quantization_config` of its `config.json`, or its "
        "`hf_quant_config.json`) to one of `4`, `8`.",)
    assert said["ToyQ needs an export section"].solutions == (
        "Use a checkpoint whose quantization config gives `export` a value (this code needs it; the one in use leaves it out).",)


CONSTRUCTORS = {
    "vllm/attention/impl.py": '''
        from typing import Generic, TypeVar

        T = TypeVar("T")

        class AttentionImpl(Generic[T]):
            def __init__(self, heads):
                raise NotImplementedError

        class FlashImpl(AttentionImpl[int]):
            def __init__(self, heads):
                self.heads = heads
    ''',
    "vllm/models/cpu_mtp.py": '''
        class ToyMTP:
            def __init__(self, vllm_config):
                raise NotImplementedError("Toy MTP is not available on this platform")
    ''',
}


def test_a_constructor_that_always_raises_is_an_interface_only_where_classes_are_built_on_it():
    said = _derived(CONSTRUCTORS)
    # FlashImpl is built on `AttentionImpl[int]`: the subscripted base still names AttentionImpl
    assert said["AttentionImpl.__init__"].kind == "abstract"
    refused = said["Toy MTP is not available on this platform"]
    assert refused.kind != "abstract" and "`ToyMTP` cannot be made at all" in refused.meaning
    assert not any("give it its own" in s for s in refused.solutions)


def test_a_wrapper_raised_from_none_says_the_original_is_hidden(reach):
    hidden = reach["The class has no registered name"]
    assert "`from None` hides the original error" in hidden.triggers[0] and "chained as its cause" not in hidden.triggers[0]
    assert "The original exception is not printed (`from None` hides it)" in hidden.meaning
    assert not any("above it in the traceback" in s for s in hidden.solutions)  # it is not there


LITERALS = {
    "vllm/model_executor/layers/act.py": '''
        def make_act(kind):
            if kind not in ("silu", "gelu"):
                raise ValueError(f"Unsupported activation {kind}")

        def make_norm(kind):
            if kind not in ("rms", "layer"):
                raise ValueError(f"Unsupported norm {kind}")

        def load_template(path, is_literal=False):
            if not is_literal and "{" in path:
                raise ValueError(f"Template path {path} looks like a template")
            return load_template(path, is_literal=True)

        def make_mlp(act):
            return make_act(act)

        def make_client(asyncio_mode, multiprocess_mode):
            if asyncio_mode and not multiprocess_mode:
                raise NotImplementedError("Running asyncio without processes is not supported")

        def make_server(asyncio_mode, multiprocess_mode):
            if asyncio_mode or multiprocess_mode:
                raise NotImplementedError("A server takes neither mode")

        def insert_cache(k, is_ue8m0=True, scale=None):
            assert is_ue8m0, "Only UE8M0 scales are supported"
            if scale is not None and scale <= 0:
                raise ValueError("The cache scale must be positive")

        class Block:
            def __init__(self, config, gated):
                self.act = make_act("silu")
                self.mlp = make_mlp("gelu")  # a parameter passed on: its own callers' literals count
                self.gate = make_act("gelu" if gated else "silu")
                self.norm = make_norm(config.norm_kind)
                self.client = make_client(asyncio_mode=False, multiprocess_mode=config.multiprocess)
                self.server = make_server(asyncio_mode=False, multiprocess_mode=config.multiprocess)
                self.cache = insert_cache(config.k)  # leaves is_ue8m0 to its default, True
                self.scaled = insert_cache(config.k, scale=config.scale)
    ''',
}


def test_a_check_every_call_passes_accepted_literals_to_is_internal():
    said = _derived(LITERALS)
    act = said["Unsupported activation {kind}"]
    assert act.kind == "internal" and "Every call of `make_act` in vLLM runs only where this check passes" in act.meaning
    assert said["Unsupported norm {kind}"].kind != "internal"  # one call passes what the checkpoint says
    # only the function itself calls it: whatever calls it first (by reference) is not seen, so nothing is claimed
    assert said["Template path {path} looks like a template"].kind != "internal"
    # the literal decides the check whatever the rest is (`False and ...`); not where the rest still can (`False or ...`)
    assert said["Running asyncio without processes is not supported"].kind == "internal"
    assert said["A server takes neither mode"].kind != "internal"
    # a parameter every call leaves to its default: the default decides (not where one call passes a value of its own)
    assert said["Only UE8M0 scales are supported"].kind == "internal"
    assert said["The cache scale must be positive"].kind != "internal"


def test_a_wait_that_ran_out_is_the_environments_and_says_whose_logs_to_read():
    said = _derived({"vllm/distributed/barrier.py": '''
        import time

        def barrier(group, timeout):
            if timeout <= 0:
                raise ValueError("barrier timeout must be positive")
            start = time.monotonic()
            while not group.done():
                if time.monotonic() - start > timeout:
                    raise RuntimeError(f"Barrier timed out after {timeout} seconds")
    '''})
    ran_out = said["Barrier timed out after {timeout} seconds"]
    assert ran_out.kind == "environment" and "a wait that ran out" in ran_out.meaning and "The logs of the process it waited for" in ran_out.meaning
    assert said["barrier timeout must be positive"].kind != "environment"  # a setting checked, not a wait


PLATFORM_SPLIT = {
    "vllm/models/toy/__init__.py": '''
        from vllm.platforms import current_platform

        if current_platform.is_rocm():
            from .amd.model import ToyModel
        elif current_platform.is_cpu():
            from .cpu.model import ToyModel
        else:
            from .nvidia.model import ToyModel
    ''',
    "vllm/models/toy/amd/model.py": '''
        from vllm.models.toy.amd.ops import fused

        class ToyModel:
            def __init__(self, heads):
                if heads % 8:
                    raise ValueError("The ROCm toy model needs heads in multiples of 8")
    ''',
    "vllm/models/toy/amd/ops.py": '''
        def fused(x):
            if x is None:
                raise ValueError("The ROCm toy kernel needs an input")
    ''',
    "vllm/models/toy/nvidia/model.py": '''
        class ToyModel:
            def __init__(self, heads):
                assert heads % 4 == 0, "The toy model needs heads in multiples of 4"
    ''',
    "vllm/models/toy/shared.py": '''
        def norm(x):
            raise NotImplementedError("The toy norm needs an input")
    ''',
    "vllm/models/toy/cpu/model.py": '''
        from vllm.models.toy.shared import norm
    ''',
    "vllm/models/toy/nvidia/loader.py": '''
        from vllm.models.toy.shared import norm
    ''',
}


def test_a_file_loaded_only_under_platform_tests_says_on_which_platforms():
    said = _derived(PLATFORM_SPLIT)
    rocm = "Within vLLM, this file is loaded only on ROCm (AMD GPUs): every import that reaches it is made under a `current_platform.is_…()` test."
    assert rocm in said["The ROCm toy model needs heads in multiples of 8"].meaning
    assert rocm in said["The ROCm toy kernel needs an input"].meaning  # imported by a ROCm-only file: ROCm only too
    assert "loaded on every platform but CPU and ROCm (AMD GPUs)" in said["The toy model needs heads in multiples of 4"].meaning
    # the CPU branch and a file nothing imports under a test (loaded from outside): every platform, nothing said
    assert "this file is loaded" not in said["The toy norm needs an input"].meaning


def test_report_counts_the_checkpoint_a_commands_option_platforms_and_wrappers():
    from vllm_errors.cli import coverage_lines

    catalog = _catalog({**REACH, **PLATFORM_SPLIT})
    lines = coverage_lines(build_knowledge_base(catalog, (derived_annotator(catalog),), ()))
    # the weight loader's checkpoint; `--num-prompts` of `vllm bench serve`, which is no `vllm serve` flag
    assert any(line.endswith("0 flag, 0 key of a JSON flag, 0 environment variable, 0 key of the checkpoint's config.json, 0 request field, "
                             "1 the checkpoint itself, 1 option of another command") for line in lines)
    # the ROCm model and kernel, the CUDA model; the control server's wrapper, two re-raises and wrapper `from None`
    assert "loaded only on some platforms: 3; raised in an `except` block, naming what its `try` block runs: 4" in lines


ORIGINS = {
    "vllm/config/compilation.py": '''
        from dataclasses import field
        from vllm.config.utils import config

        @config
        class CompilationConfig:
            level: int = 0
            """The compilation level."""
            static_forward_context: dict = field(default_factory=dict, init=False)
            """Per-model forward context, filled by the layers."""
    ''',
    "vllm/config/vllm.py": '''
        from vllm.config.utils import config
        from vllm.config.compilation import CompilationConfig

        @config
        class VllmConfig:
            compilation_config: CompilationConfig = None
    ''',
    "vllm/attention/layer.py": '''
        def register(vllm_config, name):
            if name in vllm_config.compilation_config.static_forward_context:
                raise ValueError(f"Duplicate layer name: {name}")

        def place(groups, size, wide):
            ranks = []
            for group in groups:
                ranks.append(group.rank)
            if wide:
                entry = groups[0]
            else:
                entry = groups[-1]
            if len(ranks) != size or entry is None:
                raise RuntimeError("Ranks and placement groups disagree")
    ''',
}


def test_origins_are_said_only_where_one_assignment_decides_a_local():
    said = _derived(ORIGINS)
    # `static_forward_context` is declared `field(init=False)`: vLLM fills it, it is no key of --compilation-config
    duplicate = said["Duplicate layer name: {name}"]
    assert "compilation-config" not in duplicate.meaning and not duplicate.solutions
    (trigger,) = said["Ranks and placement groups disagree"].triggers
    assert "`ranks` is set by `[]`" not in trigger  # a list filled later: its start says nothing
    assert "`entry` is set by `groups[-1]` at line 13, among other assignments." in trigger  # one branch of two


def test_what_a_handler_logs_is_advice_only_where_it_names_a_setting(reach):
    # the pieces of an f-string a handler logs ("Please install vllm[", "] for support") are no sentence to quote
    assert reach["ControlServer.load_extra"].solutions == (REPASSED,)


WRAPPING = {"vllm/distributed/comm.py": '''
        def _check(buffers):
            if not buffers:
                raise ValueError("The communicator needs buffers")

        def _check_quietly(buffers):
            if not buffers:
                raise ValueError("The quiet communicator needs buffers")

        class Communicator:
            def __init__(self, buffers):
                try:
                    _check(buffers)
                except OSError:
                    pass
                except Exception as exc:
                    raise RuntimeError(f"Failed to start the communicator ({exc})") from exc

        class Quiet:
            def __init__(self, buffers):
                try:
                    try:
                        _check_quietly(buffers)
                    except ValueError:
                        return
                except Exception as exc:
                    raise RuntimeError("The quiet one failed") from None
    '''}


def test_an_error_every_caller_wraps_says_what_the_log_ends_with():
    said = _derived(WRAPPING)
    # the handler of other exceptions does not take it; the next one raises another error in its place
    assert said["The communicator needs buffers"].meaning.endswith(
        "Where vLLM calls `_check`, it catches this error and raises `RuntimeError: Failed to start the communicator ({exc})` in its "
        "place (vllm/distributed/comm.py:17): that is what the log ends with, and this one is printed above it, in the same traceback.")
    # an inner handler keeps it: the outer wrapper never sees it
    assert "raises `RuntimeError" not in said["The quiet communicator needs buffers"].meaning


def test_an_error_a_helper_builds_takes_the_class_the_helper_returns_and_keeps_its_id():
    from vllm_errors.catalog import resolve_factories
    from vllm_errors.knowledge import title_of

    catalog = _catalog({"vllm/warmup/dispatch.py": '''
        class DispatchError(ValueError):
            pass

        def _expr_error(node, reason) -> ValueError:
            return ValueError(f"{reason}: {node}")

        def _typed_error(reason) -> "DispatchError | None":
            return DispatchError(reason)

        def _any_error(reason):
            return RuntimeError(reason)

        def visit(node):
            if node.kind == "star":
                raise _expr_error(node, "Dispatch calls cannot use **kwargs")
            if node.kind == "walrus":
                raise _typed_error("Dispatch expressions cannot assign")
            raise _any_error("Dispatch cannot read this")
    '''})
    resolved = {e.template: e for e in resolve_factories(catalog).errors}
    before = {e.template: e for e in catalog.errors}
    kwargs = resolved["Dispatch calls cannot use **kwargs"]
    assert kwargs.exception == "ValueError" and kwargs.id == before[kwargs.template].id
    assert title_of(kwargs) == "ValueError: Dispatch calls cannot use **kwargs"
    assert resolved["Dispatch expressions cannot assign"].exception.endswith("DispatchError")  # the release's own class
    # no annotation: the class stays unknown, shown as the code writes it
    assert resolved["Dispatch cannot read this"].exception == before["Dispatch cannot read this"].exception


PHASED = {
        "vllm/config/cache.py": '''
            from dataclasses import dataclass
            from vllm.config.utils import config

            @config
            @dataclass
            class CacheConfig:
                block_size: int = 16

                def __post_init__(self):
                    if self.block_size > 256:
                        raise ValueError("Blocks of over 256 tokens are refused")
        ''',
        "vllm/model_executor/layers/moe.py": '''
            from dataclasses import dataclass
            from torch import nn

            @dataclass
            class FusedMoEConfig:
                experts: int

                def __post_init__(self):
                    if self.experts < 1:
                        raise ValueError("A layer needs an expert")

            class Router(nn.Module):
                def __init__(self, experts):
                    super().__init__()
                    if experts % 2:
                        raise ValueError("The router needs an even count of experts")

            class Plain:
                def __init__(self, experts):
                    if experts % 3:
                        raise ValueError("The plain router needs thirds")
        ''',
}


def test_the_phase_a_check_runs_in_is_in_the_meaning_with_what_its_failure_ends():
    said = _derived(PHASED)
    config = said["Blocks of over 256 tokens are refused"].meaning
    assert "It runs while vLLM checks its configuration at startup, before it loads the model. `vllm serve` (or `LLM(...)`) " \
           "stops with this error, before the engine starts." in config
    router = said["The router needs an even count of experts"]
    assert "It runs while vLLM builds the model's layers at startup, before it loads the weights. If it fails at startup, the engine " \
           "does not start: with the engine in a process of its own (the default), the log ends with `RuntimeError: Engine core " \
           "initialization failed. See root cause above`" in router.meaning
    assert not any("It runs while" in s for s in router.situations)  # said once, in the meaning
    # a dataclass named like a config that a layer makes is no check of the configuration; a class not a torch module is
    # not known to be built with the model
    assert "It runs while" not in said["A layer needs an expert"].meaning
    assert "It runs while" not in said["The plain router needs thirds"].meaning


def test_what_an_assert_or_a_raise_enforces_before_a_call_is_no_way_around():
    said = _derived({"vllm/config/cache.py": '''
        from dataclasses import dataclass
        from vllm.config.utils import config

        @config
        @dataclass
        class CacheConfig:
            enable_prefix_caching: bool | None = None

        @config
        @dataclass
        class VllmConfig:
            cache_config: CacheConfig = None
    ''', "vllm/engine/args.py": '''
        def _resolve_ids(ids):
            if len(set(map(type, ids))) > 1:
                raise ValueError("Device ids must not mix kinds")

        def _resolve_slots(slots):
            if len(slots) > 4:
                raise ValueError("At most 4 slots")

        def create(vllm_config, ids, slots):
            assert vllm_config.cache_config.enable_prefix_caching is not None
            _resolve_ids(ids)
            if not vllm_config.cache_config.enable_prefix_caching:
                return None
            _resolve_slots(slots)
    '''})
    # where the assert's test fails, an AssertionError comes first: leaving the setting unset avoids nothing
    assert not any("way around" in s for s in said["Device ids must not mix kinds"].solutions)
    # an early return is one: with prefix caching off, vLLM does not get there
    assert any("way around" in s for s in said["At most 4 slots"].solutions)


def test_the_way_around_a_call_is_the_innermost_condition_it_is_made_under():
    said = _derived({"vllm/config/spec.py": '''
        from dataclasses import dataclass
        from vllm.config.utils import config

        @config
        @dataclass
        class SpecConfig:
            method: str = "ngram"
            factor: float = 1.0

            def _validate_suffix(self):
                if self.factor < 0:
                    raise ValueError("The suffix factor must be at least 0")

            def check(self):
                if self.method in ("ngram", "ngram_gpu"):
                    return
                elif self.method == "suffix":
                    self._validate_suffix()
    '''})
    (way,) = [s for s in said["The suffix factor must be at least 0"].solutions if "way around" in s]
    assert "other than `'suffix'`" in way and "'ngram'" not in way.partition("(")[0]


def test_a_parameter_holding_the_checkpoints_config_reads_its_keys():
    said = _derived({
        "vllm/transformers_utils/configs/toy.py": '''
            from transformers import PretrainedConfig

            class ToyConfig(PretrainedConfig):
                model_type = "toy"
        ''',
        "vllm/model_executor/models/toy.py": '''
            from torch import nn
            from transformers import PretrainedConfig
            from vllm.transformers_utils.configs.toy import ToyConfig

            class ToyLayer(nn.Module):
                def __init__(self, config: PretrainedConfig, prefix: str = ""):
                    super().__init__()
                    if not hasattr(config, "first_dense"):
                        raise ValueError("first_dense is missing from the config")
                    if config.num_experts > 64:
                        raise ValueError("The toy layer takes at most 64 experts")

            class ToyHead(nn.Module):
                def __init__(self, config: ToyConfig, sizes: list):
                    super().__init__()
                    if config.vocab_size < 8:
                        raise ValueError("The toy head needs a vocabulary of 8 or more")
                    if len(sizes) > 2:
                        raise ValueError("The toy head takes at most two sizes")
        ''',
    })
    # presence, not a value: any value does
    assert said["first_dense is missing from the config"].solutions == (
        "Give `first_dense` in the model's `config.json` (or `--hf-overrides`) a value (any value: what is checked is that it is there).",)
    assert said["The toy layer takes at most 64 experts"].kind == "user"
    assert said["The toy layer takes at most 64 experts"].solutions == (
        "Make `num_experts` in the model's `config.json` (or `--hf-overrides`) at most `64`.",)
    assert "`vocab_size` in the model's `config.json`" in said["The toy head needs a vocabulary of 8 or more"].solutions[0]
    assert said["The toy head takes at most two sizes"].solutions == ()  # a list vLLM passes: no key of the checkpoint


def test_report_counts_errors_wrapped_by_callers_and_those_that_say_what_their_phase_ends():
    from vllm_errors.cli import coverage_lines

    catalog = _catalog({**WRAPPING, **PHASED, **SESSION})
    lines = coverage_lines(build_knowledge_base(catalog, (derived_annotator(catalog),), ()))
    # the session's refused peer (kept and logged) and its metadata check (raised again as another error)
    # (the refused peer's log line is what the lookup finds it by)
    assert any(line.endswith("every call wraps it in another error: 1; its own `try` block takes it: 2; found by the line vLLM logs "
                             "in its place: 1") for line in lines)
    # the configuration check and the router's constructor; not FusedMoEConfig's nor the plain class's
    assert f"say the phase of startup the check runs in and what its failure ends: 2 ({2 / len(catalog.errors):.1%})" in lines


def test_a_check_of_the_gpus_compute_capability_is_the_environments_unless_the_message_names_a_flag():
    said = _derived({"vllm/engine/arg_utils.py": '''
        def add_cli_args(parser):
            parser.add_argument("--kv-cache-dtype", type=str, default="auto")
    ''', "vllm/model_executor/layers/fused_moe/mega.py": '''
        from vllm.platforms import current_platform

        def check_mega_supported(device):
            if not current_platform.is_device_capability_family(100, device_id=device.index or 0):
                raise RuntimeError("Mega MoE requires SM100 GPUs.")

        def check_cache_dtype(cache_dtype):
            if cache_dtype == "bfloat16" and not current_platform.has_device_capability(80):
                raise ValueError("bfloat16 KV cache needs SM80; re-run with --kv-cache-dtype float16.")

        def pick(x):
            if current_platform.is_rocm():
                raise NotImplementedError("Mega MoE has no ROCm path")
    '''})
    mega = said["Mega MoE requires SM100 GPUs."]
    assert mega.kind == "environment" and "a GPU of the compute capability (generation) this code path needs" in mega.meaning
    assert said["bfloat16 KV cache needs SM80; re-run with --kv-cache-dtype float16."].kind == "user"  # the message's remedy
    assert said["Mega MoE has no ROCm path"].kind != "environment"  # the platform picks a branch: no capability read


SESSION = {"vllm/transfer/session.py": '''
        import logging

        logger = logging.getLogger(__name__)


        class Session:
            def connect(self, peer):
                try:
                    if peer.version != 2:
                        raise ValueError("The peer speaks another protocol version")
                    self.open(peer)
                except Exception as exc:
                    logger.error("Rejecting peer connect: %s", exc)
                    return False
                return True

            def parse(self, text):
                try:
                    if not text.startswith("{"):
                        raise ValueError("Metadata must be a JSON object")
                    return text
                except ValueError as e:
                    raise RuntimeError(f"Invalid transfer metadata: {e}") from e

            def check(self, text):
                try:
                    if not text:
                        raise KeyError("Metadata has no key")
                except ValueError:
                    return None
    '''}


def test_a_raise_its_own_try_block_catches_says_what_the_user_sees_instead():
    said = _derived(SESSION)
    refused = said["The peer speaks another protocol version"]
    assert ("The `try` block around this raise catches it (the handler at line 13): the error does not leave `Session.connect`, and "
            "vLLM logs ERROR `Rejecting peer connect: {exc}` in its place.") in refused.meaning
    assert refused.logged == ("Rejecting peer connect: {exc}",)  # the lookup finds it by that line
    assert ("The `try` block around this raise catches it and raises `RuntimeError: Invalid transfer metadata: {e}` in its place "
            "(vllm/transfer/session.py:24): that is what the log ends with") in said["Metadata must be a JSON object"].meaning
    assert "The `try` block" not in said["Metadata has no key"].meaning  # a KeyError: that handler does not take it


def test_an_error_raised_in_copies_for_several_platforms_is_said_of_them_all():
    files = dict(PLATFORM_SPLIT)
    for part in ("amd", "nvidia"):  # the same check in the ROCm copy and in the copy every other platform loads
        files[f"vllm/models/toy/{part}/pack.py"] = '''
            def pack(rows):
                if rows % 4:
                    raise ValueError("Packed rows come in fours")
        '''
        files[f"vllm/models/toy/{part}/model.py"] += f"\n            from vllm.models.toy.{part}.pack import pack\n"
    said = _derived(files)
    # ROCm's copy and the one every platform but ROCm and CPU loads: together, all but CPU (not "only on ROCm")
    assert ("Within vLLM, the files raising it are loaded on every platform but CPU: every import that reaches them is made "
            "under a `current_platform.is_…()` test.") in said["Packed rows come in fours"].meaning


def test_a_config_vllm_hands_a_json_flags_class_is_no_key_of_it():
    said = _derived({"vllm/config/speculative.py": '''
        from dataclasses import dataclass
        from pydantic import SkipValidation
        from vllm.config.utils import config

        @config
        @dataclass
        class ModelConfig:
            max_model_len: int = 0

        @config
        @dataclass
        class SpeculativeConfig:
            num_speculative_tokens: int = 1
            target_model_config: SkipValidation[ModelConfig] = None

            def __post_init__(self):
                if self.target_model_config is None:
                    raise ValueError("The target model config is missing")

        @config
        @dataclass
        class VllmConfig:
            speculative_config: SpeculativeConfig = None
    ''', "vllm/engine/arg_utils.py": '''
        def add_cli_args(parser):
            parser.add_argument("--speculative-config", type=str)
    '''})
    assert not any("target_model_config" in s for s in said["The target model config is missing"].solutions)


ROLED = {
    "vllm/model_executor/layers/quantization/base_config.py": '''
        from abc import ABC

        class QuantizeMethodBase(ABC):
            def create_weights(self, layer):
                raise NotImplementedError

        class QuantizationConfig(ABC):
            pass
    ''',
    "vllm/model_executor/layers/quantization/mine.py": '''
        from torch import nn
        from vllm.model_executor.layers.quantization.base_config import QuantizationConfig, QuantizeMethodBase

        class MineConfig(QuantizationConfig):
            def __init__(self, bits):
                if bits not in (4, 8):
                    raise ValueError("Mine takes 4 or 8 bits")

        class MineLinearMethod(QuantizeMethodBase):
            def create_weights(self, layer, size):
                if size % 64:
                    raise ValueError("Mine needs sizes divisible by 64")

            def apply(self, layer, x):
                if x.dim() != 2:
                    raise ValueError("Mine computes 2-D inputs")

        class Gate(nn.Module):
            def forward(self, x):
                if x.dim() != 2:
                    raise ValueError("The gate computes 2-D inputs")

        class Helper:
            def forward(self, x):
                if x is None:
                    raise ValueError("The helper needs an input")
    ''',
}


def test_the_methods_vllm_calls_on_the_classes_a_model_is_built_of_run_in_their_phase():
    said = _derived(ROLED)
    assert "It runs while vLLM checks its configuration at startup" in said["Mine takes 4 or 8 bits"].meaning
    assert "It runs while vLLM builds the model's layers at startup" in said["Mine needs sizes divisible by 64"].meaning
    for computed in ("Mine computes 2-D inputs", "The gate computes 2-D inputs"):
        meaning = said[computed].meaning
        assert "It runs while the model computes a batch: first at startup" in meaning
        assert "If it fails at startup, the engine does not start" in meaning
        assert "If it fails while serving, the engine's process logs `EngineCore encountered a fatal error.`" in meaning
    # a class that is no torch module, no quantization method, is not known to run with the model
    assert "It runs while" not in (said["The helper needs an input"].meaning or "")


def test_a_function_that_calls_itself_is_not_said_to_be_called_from_itself():
    said = _derived({"vllm/model_executor/layers/walk.py": '''
        def walk(node, depth):
            if depth > 64:
                raise ValueError("The tree is too deep to walk")
            for child in node.children:
                walk(child, depth + 1)

        def start(tree):
            return walk(tree, 0)
    '''})
    meaning = said["The tree is too deep to walk"].meaning
    assert "vLLM calls `walk` from `start` (vllm/model_executor/layers/walk.py:9)." in meaning
    assert "from `walk`" not in meaning


def test_what_a_failure_ends_is_not_said_where_a_call_of_the_function_takes_the_error():
    said = _derived({
        "vllm/model_executor/model_loader/base_loader.py": '''
            class BaseModelLoader:
                def load_weights(self, model):
                    raise NotImplementedError
        ''',
        "vllm/model_executor/model_loader/disk.py": '''
            import logging
            from vllm.model_executor.model_loader.base_loader import BaseModelLoader
            logger = logging.getLogger(__name__)

            class DiskLoader(BaseModelLoader):
                def load_weights(self, model, path):
                    if not path:
                        raise ValueError("The disk loader needs a path")

            class Loader:
                def load_model(self, model, path):
                    if path is None:
                        raise ValueError("No path to load from")

            def load(loader, model, path):
                try:
                    return Loader().load_model(model, path)
                except ValueError:
                    logger.warning("Falling back to random weights")
        ''',
    })
    disk = said["The disk loader needs a path"].meaning
    assert "It runs while vLLM loads the model's weights at startup." in disk  # a loader's own: not again on reloads
    assert "reloaded" not in disk
    taken = said["No path to load from"].meaning
    assert "It runs while vLLM loads the model's weights" in taken
    assert "the engine does not start" not in taken  # its caller takes the error: it may end nothing


def test_a_handler_that_raises_again_only_under_a_test_may_take_the_error():
    said = _derived({"vllm/model_executor/model_loader/cached.py": '''
        import logging
        logger = logging.getLogger(__name__)

        class CachedLoader:
            def load_model(self, model, cache):
                try:
                    if cache.role != model.role:
                        raise ValueError("The cache holds another model's weights")
                except ValueError:
                    if not self.fallback:
                        raise
                    logger.warning("Loading from disk instead")

            def load_weights(self, model, files):
                if not files:
                    raise FileNotFoundError("No weight files")

        def load(loader, model, files, strict):
            try:
                loader.load_weights(model, files)
            except FileNotFoundError:
                if strict:
                    raise
    '''})
    for template in ("The cache holds another model's weights", "No weight files"):
        meaning = said[template].meaning
        assert "It runs while vLLM loads the model's weights" in meaning
        assert "the engine does not start" not in meaning


def test_a_function_every_call_of_which_is_made_in_one_phase_runs_in_that_phase():
    said = _derived({
        "vllm/config/cache.py": '''
            from dataclasses import dataclass
            from vllm.config.utils import config

            def _check_blocks(size):
                if size > 256:
                    raise ValueError("Blocks of over 256 tokens are refused")

            def _verify(size):
                _check_blocks(size)

            @config
            @dataclass
            class CacheConfig:
                block_size: int = 16

                def __post_init__(self):
                    _verify(self.block_size)
        ''',
        "vllm/model_executor/model_loader/disk.py": '''
            def _shared(n):
                if n < 0:
                    raise ValueError("A negative count of shards")

            class DiskLoader:
                def load_weights(self, model, n):
                    _shared(n)

            def create_engine_config(n):
                _shared(n)
        ''',
    })
    blocks = said["Blocks of over 256 tokens are refused"].meaning
    assert ("It runs while vLLM checks its configuration at startup, before it loads the model: vLLM calls it from `_verify` "
            "(vllm/config/cache.py:10). `vllm serve` (or `LLM(...)`) stops with this error, before the engine starts.") in blocks
    assert blocks.count("vLLM calls") == 1  # the callers are said once
    # called in two phases: neither is said to be the one it runs in
    shards = said["A negative count of shards"]
    assert "It runs while" not in shards.meaning
    assert [s.split(", which runs ")[1] for s in shards.situations] == [
        "while vLLM loads the model's weights (at startup, and again where weights are reloaded).",
        "while vLLM checks its configuration at startup, before it loads the model."]
    assert shards.situations[0].startswith("Calls in vLLM reach it from `DiskLoader.load_weights` (vllm/model_executor/model_loader/disk.py)")



def test_a_caller_that_catches_the_error_on_its_way_up_is_no_situation_of_it():
    said = _derived({
        "vllm/model_executor/layers/quantization/base.py": '''
            def get_from_keys(config, keys):
                for key in keys:
                    if key in config:
                        return config[key]
                raise ValueError(f"Cannot find any of {keys} in the config")

            def get_from_keys_or(config, keys, default):
                try:
                    return get_from_keys(config, keys)
                except ValueError:
                    return default
        ''',
        "vllm/model_executor/model_loader/disk.py": '''
            from vllm.model_executor.layers.quantization.base import get_from_keys, get_from_keys_or

            class DiskLoader:
                def load_weights(self, config):
                    return get_from_keys(config, ["bits"])

            def create_engine_config(config):
                return get_from_keys_or(config, ["ignored"], [])
        ''',
    })
    situations = said["Cannot find any of {keys} in the config"].situations
    assert any("`DiskLoader.load_weights`" in s for s in situations), situations
    # create_engine_config reaches it only through get_from_keys_or, whose `except ValueError` takes it
    assert not any("create_engine_config" in s or "get_from_keys_or" in s for s in situations), situations

def test_a_torch_dtype_the_code_compares_with_is_the_flag_value_the_user_types():
    said = _derived({
        "vllm/config/model.py": '''
            from dataclasses import dataclass
            from typing import Literal
            from vllm.config.utils import config

            @config
            @dataclass
            class ModelConfig:
                dtype: Literal["auto", "half", "bfloat16", "float32"] = "auto"
        ''',
        "vllm/engine/arg_utils.py": '''
            from vllm.config.model import ModelConfig

            def get_kwargs(cls):
                return {}

            class EngineArgs:
                def add_cli_args(parser):
                    model_kwargs = get_kwargs(ModelConfig)
                    parser.add_argument("--dtype", **model_kwargs["dtype"])
        ''',
        "vllm/v1/attention/backends/mine.py": '''
            import torch

            class MineImpl:
                def __init__(self, vllm_config):
                    if vllm_config.model_config.dtype != torch.bfloat16:
                        raise ValueError("Mine needs bfloat16")
        ''',
    })
    (solution,) = said["Mine needs bfloat16"].solutions
    assert solution.startswith("Pass `--dtype bfloat16`")
