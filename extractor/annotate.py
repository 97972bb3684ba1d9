"""The derived annotator: what an error means and how to avoid it, worked out from the code alone."""

from __future__ import annotations

import ast
import re
import shlex
import textwrap
from dataclasses import dataclass, replace
from typing import Callable

from . import conditions as c
from .catalog import hierarchy
from .markup import code, doc_md, md, one_line
from .facts import PLATFORMS
from .program import REQUEST_CLASSES
from .knowledge import short_name, subsystem_of, title_of
from .model import Annotation, Catalog, Condition, ConfigField, EnvVar, ErrorEntry, ExampleFix, Flag, RaiseSite
from .program import parse as parse_text
from .scanner import module_name
from .selection import Selection, runs_only_when, selections, ways_around

MAX_SOLUTIONS = 6
MAX_GATED_CALLS = 8  # calls of a function looked at for a setting they are all made under
MAX_BASES_SAID = 2  # exception classes whose documentation a meaning quotes: the raised one and a base
_INTERNAL = re.compile(
    r"unreachable|should (never|not) (happen|be reached|occur)|internal error|this is a bug|not expected to|"
    r"invariant|sanity check|please report|must not happen|should (?:have been|be|already be) handled",
    re.I,
)
# An assert whose message states a limitation is about what the user asked for, not an invariant.
_LIMITATION = re.compile(
    r"support|compatib|-only\b|\bonly (?:works|available|allowed)|please|not allowed|\bset\b|--[a-z]|\benable|\bdisable|"
    r"must (?:be|have) (?:set|enabled|disabled|one of|a multiple|divisible|positive|greater|less|at least|at most)|divisible|"
    r"exceed|too (?:large|small|long|many)|\bdead\b|unavailable|not found|no such|does not exist",
    re.I,
)
_CONTROL_TYPES = {"SystemExit", "StopIteration", "StopAsyncIteration", "KeyboardInterrupt", "GeneratorExit", "CancelledError"}
_ENVIRONMENT_TYPES = {"ImportError", "ModuleNotFoundError", "FileNotFoundError", "PermissionError", "ConnectionError",
                      "ConnectionRefusedError", "ConnectionResetError", "TimeoutError", "OutOfMemoryError"}
_ENVIRONMENT = re.compile(r"pip install|is not installed|please install|install (?:it|them|the)\b|not available on this (?:machine|system|platform)|"
                          r"driver version|no (?:cuda|gpu|nvidia|rocm) (?:device|gpu)s? (?:is |are )?(?:available|found)", re.I)
# A wait that ran out: another process, a device or the network did not answer in time (not a timeout setting checked).
_TIMED_OUT = re.compile(r"\btimed out\b|did not (?:become ready|respond|receive|start)|not ready (?:after|before|within)|"
                        r"(?:did not|didn't|no) \w+(?: \w+)? (?:within|before) ", re.I)
# What a `try` catches when what failed is the machine's: a file, a socket, a process, a library that would not load.
_CAUGHT_ENVIRONMENT = _ENVIRONMENT_TYPES | {"OSError", "IOError", "ZMQError", "CalledProcessError", "TimeoutExpired", "DistNetworkError",
                                            "GetTimeoutError", "LibsndfileError"}
# Calls a `try` block makes that say nothing of what it tries: conversions, checks, logging.
_PLAIN_CALLS = {"len", "isinstance", "str", "int", "float", "bool", "list", "dict", "tuple", "set", "print", "getattr", "hasattr",
                "setattr", "format", "super", "type", "repr", "range", "enumerate", "zip", "sorted", "min", "max", "join", "append"}
_CONVERSIONS = {"tuple", "list", "set", "frozenset", "sorted", "str", "int", "float"}  # calls whose value is their argument's, converted
_BOUNDS = {ast.Lt: "below", ast.LtE: "at most", ast.Gt: "above", ast.GtE: "at least"}
_PLATFORM_NAMES = {"cuda": "CUDA (NVIDIA GPUs)", "rocm": "ROCm (AMD GPUs)", "xpu": "XPU (Intel GPUs)", "cpu": "CPU", "tpu": "TPU"}
_EMPTY = ("[]", "{}", "()", "set()", "dict()", "list()", "''", '""')  # how a container filled later starts
MAX_COMMANDS = 3  # commands named for an option several of them take
MAX_TRIED = 3  # calls of a `try` block a wrapper's meaning names
REPASSED = ("Look up the exception this passes on, not this line: the last line of the traceback (its type and message) "
            "is the error to fix.")
_USER_TYPES = {"ValueError", "TypeError", "NotImplementedError", "KeyError", "FileNotFoundError", "ImportError", "ModuleNotFoundError", "PermissionError", "OSError"}
# When vLLM runs a function: the phases of a server's life, known by the functions that run them. A function is in a
# phase when it is one of these or one of them reaches it through calls (the program model links them by name).
_CONFIGURING = "while vLLM checks its configuration at startup, before it loads the model"
_LOADING = "while vLLM loads the model's weights (at startup, and again where weights are reloaded)"
# A model loader's own methods load at startup only: reloading weights goes through the model's `load_weights`.
_LOADING_ONCE = "while vLLM loads the model's weights at startup"
_BUILDING = "while vLLM builds the model's layers at startup, before it loads the weights"
PHASES = (
    (re.compile(r"(?:^|\.)(?:create_engine_config|VllmConfig\.__post_init__|[A-Za-z]*Config\.__post_init__|verify_with_parallel_config)$"),
     _CONFIGURING),
    (re.compile(r"(?:^|\.)(?:init_device|init_worker_distributed_environment)$"), "while a worker process starts on its GPU"),
    (re.compile(r"(?:^|\.)(?:load_model|load_weights|_load_weights|process_weights_after_loading)$"),
     _LOADING),
    (re.compile(r"(?:^|\.)(?:determine_available_memory|profile_run)$"), "while vLLM measures memory at startup to size the KV cache"),
    (re.compile(r"(?:^|\.)(?:initialize_kv_cache|_initialize_kv_caches|initialize_from_config|get_kv_cache_configs?|get_kv_cache_spec|"
                r"register_kv_caches)$"),
     "while vLLM sets up the KV cache at startup"),
    (re.compile(r"(?:^|\.)(?:capture_model|compile_or_warm_up_model)$"), "while vLLM compiles the model and captures CUDA graphs at startup"),
    (re.compile(r"(?:^|\.)(?:create_chat_completion|create_completion|create_embedding|create_pooling|create_score|create_transcription|process_inputs)$"),
     "when a request arrives, before it is scheduled"),
    (re.compile(r"(?:^|\.)(?:execute_model|sample_tokens)$"), "while a batch runs, at each engine step"),
)
_COMPUTING = ("while the model computes a batch: first at startup, on the dummy batches vLLM runs to measure memory and capture "
              "CUDA graphs, then at every step while serving")
_SERVING = {"while a batch runs, at each engine step", _COMPUTING}  # phases that run on every step of a serving engine
# Where the code that builds a model lives: a constructor of a torch module there runs as vLLM makes the model.
_MODEL_CODE = re.compile(r"^vllm/(?:model_executor|models)/")
# When vLLM runs the methods of the classes it builds a model of, by the class they are built on: (bases, methods, phase,
# whether only in the code that builds models). A layer makes its quantization method and attention implementation as
# it is made, and calls them as it computes; vLLM reads the checkpoint's quantization config as it checks its own.
ROLES = (
    (frozenset({"Module"}), frozenset({"__init__"}), _BUILDING, True),
    (frozenset({"QuantizationConfig"}), frozenset({"__init__", "from_config", "override_quantization_method"}), _CONFIGURING, False),
    (frozenset({"QuantizationConfig"}), frozenset({"get_quant_method"}), _BUILDING, False),
    (frozenset({"QuantizeMethodBase"}), frozenset({"__init__", "create_weights"}), _BUILDING, False),
    (frozenset({"QuantizeMethodBase"}), frozenset({"apply", "apply_monolithic"}), _COMPUTING, False),
    (frozenset({"AttentionImplBase"}), frozenset({"__init__"}), _BUILDING, False),
    (frozenset({"AttentionImplBase"}), frozenset({"forward"}), _COMPUTING, False),
    (frozenset({"Module"}), frozenset({"forward", "forward_native", "forward_cuda", "forward_hip", "forward_cpu", "forward_xpu"}), _COMPUTING, True),
)
# What a user sees when an error ends each phase of startup: a configuration check ends `vllm serve` itself; the
# others run in the engine's process, whose failure the API server reports with its own error after this one.
_STARTUP_ENDS = {_CONFIGURING: "`vllm serve` (or `LLM(...)`) stops with this error, before the engine starts."}
ENGINE_FAILED = ("If it fails at startup, the engine does not start: with the engine in a process of its own (the default), the log ends "
                 "with `RuntimeError: Engine core initialization failed. See root cause above`, and this error, printed before it "
                 "by the engine's process, is the one to fix.")
# What a user sees when an error ends the engine's step while it serves (vllm/v1/engine/core.py, exceptions.py).
ENGINE_DIED = ("If it fails while serving, the engine's process logs `EngineCore encountered a fatal error.` with this error's traceback "
               "and stops; the API server then fails every request with `EngineDeadError: EngineCore encountered an issue. See stack "
               "trace (above) for the root cause.`, and clients get “The server had an error while processing your request.”")
MAX_PHASES = 3  # phases said on one page
MAX_INHERITED = 3  # calls followed up to the phase all calls of a function are made in
MAX_CALLERS_PHASED = 8  # calls of a function looked at for the phase they share
# Where vLLM reads a checkpoint's tensors: `load_weights(self, weights)` is handed (name, tensor) pairs from its files,
# a parameter's `weight_loader(param, loaded_weight, ...)` one tensor of them.
_WEIGHT_LOADING = re.compile(r"(?:^|\.)_?(?:load_weights|weight_loader|load_weight|[a-z0-9_]*_weight_loader)$")
_CHECKPOINT_TENSORS = frozenset({"weights", "loaded_weight", "loaded_weights", "weight_name"})
MAX_CHECKPOINT_STEPS = 3  # assignments followed from a checkpoint's tensor to what a condition reads
_DECIDING = {"if", "elif", "else", "assert", "case"}  # conditions that test something (not loops, not early exits)
CHECKPOINT_ADVICE = [
    "Check the model's checkpoint: a tensor in it (its name, shape or dtype; the message shows which) is not what vLLM's "
    "implementation of this model loads. Use the model's official release, complete and unmodified (download again what "
    "was cut short), or convert a checkpoint exported by another tool (renamed or merged tensors, another quantization "
    "format) to that layout."]

_HOLDING = {"if", "elif", "else", "exit", "while", "assert", "case"}  # conditions that decide whether the raise runs
# What a condition reads that vLLM computes itself: the layout of a tensor (`x.shape[1] != hidden`, `w.dim() != 2`),
# unless the tensor is something the caller was handed from outside (a request's, an argument's).
_TENSOR_LAYOUT = frozenset({"shape", "ndim", "dtype", "is_contiguous", "numel", "dim", "size", "stride", "itemsize", "element_size", "nbytes"})
_HANDED_IN = frozenset({"args", "request", "params", "sampling_params", "pooling_params", "kwargs", "options", "prompt", "inputs", "mm_data",
                        "data", "messages", "message", "content", "config", "hf_config", "patch", "meta", "metadata"})
# The code that prepares and launches GPU kernels: vLLM calls it with values it derives from the model and the backend.
_KERNEL_CODE = re.compile(r"/ops/|cute_dsl|triton|/kernels/|fused_moe/|_custom_ops|_aiter_ops|cutlass|deep_gemm")
# Where vLLM handles what a request or a user's file brings (media, prompts, embeddings): its tensors are handed in;
# so is what a checkpoint brings, checked as its weights load.
_INPUT_CODE = re.compile(r"^vllm/(?:multimodal|renderers|entrypoints|inputs)/|/processors/|Processor\.|ProcessingInfo\.|Parser\.|Renderer\.|"
                         r"load_weights|weight_loader|_check_weight")
# What the machine has: `HAS_TRITON`, `x.is_cuda`, `flashinfer_available()`; a check of it is the environment's.
_MACHINE = re.compile(r"^_?HAS_[A-Z0-9_]+$|^_?[A-Z0-9]+_AVAILABLE$|^(?:is_)?[a-z0-9]+_available$")
_MACHINE_CALL = re.compile(r"^has_[a-z0-9_]+$")  # `has_deep_ep()`; a local `has_prefill` is no such thing
# `current_platform.is_device_capability_family(100)`: what the GPU can do (not `is_rocm()`, which picks a branch)
_PLATFORM_CALL = re.compile(r"^(?:is_device_capability\w*|has_device_capability|get_device_capability)$")
# The base of the classes that hold a checkpoint's config.json: their fields are its keys.
_CHECKPOINT_CONFIG = {"PretrainedConfig", "PreTrainedConfig"}  # transformers 5 spells it PreTrainedConfig


# A flag (`--enable-mm-embeds`, `--no-x`, the `--pooler-config` of `--pooler-config.task`) or a VLLM_* variable in a message.
MESSAGE_LEVER = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*|\bVLLM_[A-Z0-9_]*[A-Z0-9]\b")
MAX_ADVICE = 2  # sentences of a message quoted as solutions
# A sentence that tells the reader what to do: "Use a checkpoint that ...", "Please select an MoE kernel ...".
_ADVISING = re.compile(r"^(?:please |you (?:can|may|should|must|need to) |consider |try |make sure |ensure )?(?:use|set|increase|decrease|"
                       r"reduce|lower|raise|install|upgrade|specify|pass|enable|disable|remove|provide|add|free|check|switch|choose|"
                       r"select|update|downgrade|turn)\b", re.I)
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z`'\"-])")


@dataclass(frozen=True)
class Setting:
    """Something a user sets that an expression reads."""

    label: str  # how to name it: "`--max-model-len`", "`VLLM_USE_V1`", "`remote_serde`"
    flag: Flag | None = None
    field: ConfigField | None = None
    env: EnvVar | None = None
    via: tuple[str, ...] = ()  # where a parameter the guard reads is given it: "`Worker.__init__` passes `x` (path:line)"

    @property
    def name(self) -> str:
        if self.flag:
            return self.flag.flags[0]
        if self.env:
            return self.env.name
        return self.label


@dataclass(frozen=True)
class Gate:
    """A setting every call of a function is made under, and choosing otherwise as a way around the raise in it."""

    said: str  # what the meaning says of it
    way: str  # the action that makes the condition false: "Leave `--profiler-config` unset (None)."
    why: str  # "vLLM calls `f` only where `cond` holds."
    setting: str  # the setting's name


def _class_of(site: RaiseSite) -> str:
    """The qualified name of the class whose method raises: `vllm.v1.worker.runner.Runner`; "" outside a class."""
    owner, _, _ = site.function.rpartition(".")
    return f"{module_name(site.path)}.{owner}" if owner else ""


@dataclass(frozen=True)
class Place:
    """Where an expression is read: a raise site, or a caller that passes the value on."""

    path: str
    function: str
    assignments: tuple = ()


_NOT_EXCEPTIONS = {"SystemExit", "KeyboardInterrupt", "GeneratorExit"}  # BaseException's own: `except Exception` lets them by
MAX_VIA = 2  # calls shown as the reason a parameter is a setting
CHECKPOINT_FIELDS = ("hf_config", "hf_text_config")  # ModelConfig's view of the checkpoint's config.json
QUANTIZATION_CONFIG = "the `quantization_config` of its `config.json`, or its `hf_quant_config.json`"  # what from_config reads


_ENVIRON_CALLS = (["os", "environ", "get"], ["os", "getenv"], ["environ", "get"], ["getenv"])


def environment_read(node: ast.expr) -> str | None:
    """The variable `os.environ.get("X", ...)`, `os.getenv("X")` or `os.environ["X"]` reads; None for other code."""
    if isinstance(node, ast.Call) and c.attribute_chain(node.func) in _ENVIRON_CALLS and node.args:
        name = node.args[0]
    elif isinstance(node, ast.Subscript) and c.attribute_chain(node.value) in (["os", "environ"], ["environ"]):
        name = node.slice
    else:
        return None
    return name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.isidentifier() else None


class Settings:
    """The engine settings of one release: config classes and fields, their flags, and environment variables."""

    def __init__(self, catalog: Catalog) -> None:
        self.program = catalog.program
        self.fields = {(f.config, f.name): f for f in catalog.config_fields}
        self.configs = {f.config for f in catalog.config_fields}
        self.flags = {(f.config, f.field): f for f in catalog.flags if f.config}
        self.envs = {v.name: v for v in catalog.env_vars}
        self.flag_paths = {f.path for f in catalog.flags if f.config}
        by_field: dict[str, list[Flag]] = {}
        for flag in (f for f in catalog.flags if f.config):
            by_field.setdefault(flag.field, []).append(flag)
        self.flags_by_field = {name: flags[0] for name, flags in by_field.items() if len(flags) == 1}
        self.flags_by_name = {name: f for f in catalog.flags for name in f.flags if name.startswith("--")}
        # The options of the commands (`vllm bench serve --num-prompts`, `vllm serve --port`) that set no engine config
        # field, by the name argparse gives their value (`args.num_prompts`).
        self.options: dict[str, list[Flag]] = {}
        for flag in (f for f in catalog.flags if not f.config):
            long = next((name for name in flag.flags if name.startswith("--")), "")
            if long:
                self.options.setdefault(long[2:].replace("-", "_"), []).append(flag)
        # `vllm_config.cache_config` is a CacheConfig: VllmConfig's fields name the others.
        self.holders = {f.name: f.type.split("|")[0].strip() for f in catalog.config_fields if f.config == "VllmConfig"}
        self.holders = {k: v for k, v in self.holders.items() if v in self.configs}
        # `--compilation-config` takes CompilationConfig as JSON: a field without a flag of its own is a key of it.
        self.json_flags = {self.holders[f.field]: f for f in catalog.flags if f.config == "VllmConfig" and f.field in self.holders}
        # What `self.x` holds, per class, where every method that sets it sets it to the same setting.
        values: dict[tuple[str, str], set[str]] = {}
        for fact in catalog.attributes:
            values.setdefault((fact.cls, fact.attr), set()).add(fact.value)
        self.attributes = {key: next(iter(found)) for key, found in values.items() if len(found) == 1}

    def lever_exists(self, flag: str, key: str = "") -> bool:
        """Whether the release has the flag, and, for a key of the JSON it takes, its config class that field."""
        if flag not in self.flags_by_name:
            return False
        return not key or any(f.flags and flag in f.flags and (config, key) in self.fields for config, f in self.json_flags.items())

    def resolve(self, node: ast.expr, site: RaiseSite, hops: int = 3) -> Setting | None:
        read = environment_read(node)
        if read and (read in self.envs or not read.startswith("VLLM_")):  # a VLLM_* variable is one envs.py declares
            return Setting(label=f"the environment variable {code(read)}", env=self.envs.get(read))
        extra = (self._extra_config_key(node, site) or self._raw_request_key(node, site) or self._quantization_key(node, site)
                 or self._group_size(node))
        if extra:
            return extra
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords and hops:
            if node.func.id in _CONVERSIONS and len(node.args) == 1:  # `tuple(self.ids)` holds what the setting holds
                return self.resolve(node.args[0], site, hops - 1)
            if node.func.id in ("getattr", "hasattr") and len(node.args) in (2, 3) and isinstance(node.args[1], ast.Constant) and \
                    isinstance(node.args[1].value, str) and node.args[1].value.isidentifier():  # `getattr(cfg, "num_labels", 0)`
                return self.resolve(ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Load()), site, hops - 1)
        holder, how, key = _keyed(node)
        if how in ("get", "[]") and key and hops:  # `rope_scaling.get("type")`: a key of a dict setting
            inner = self.resolve(holder, site, hops - 1)
            if inner and not inner.env:
                return replace(inner, label=f"{code(key)} in {_setting_words(inner)}", flag=None, field=None)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("values", "items", "keys") \
                and not node.args and hops:  # `for rope in self.rope_parameters.values()`: the dict's own entries
            return self.resolve(node.func.value, site, hops - 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1 and hops:
            inner = self.resolve(node.args[0], site, hops - 1)  # `len(self.logprob_token_ids)`: how many items it holds
            return replace(inner, label=f"the number of items in {_setting_words(inner)}", flag=None, field=None, env=None) if inner else None
        chain = c.attribute_chain(node)
        if not chain and isinstance(node, ast.Attribute):
            return self._from_call(node)
        if not chain:
            return None
        if len(chain) == 2 and chain[0] == "args":  # what a command's parsed options hold
            option = self._option(chain[1], site)
            if option:
                return option
        owner = site.function.rpartition(".")[0].rpartition(".")[2]
        if len(chain) == 2 and chain[0] == "self" and owner and self.program is not None:
            declared = self.program.request_field(owner, chain[1])  # `self.top_k` in a method of SamplingParams
            if declared:
                return _request_setting(declared, chain[1])
        if len(chain) == 2 and chain[0] not in ("self", "cls") and not chain[1].startswith("_") and self._holds_checkpoint_config(chain[0], site):
            # `config.first_k_dense_replace`, `config: PretrainedConfig` a parameter of the model's code: a key of its config.json
            return Setting(label=f"{code(chain[1])} in the model's `config.json` (or `--hf-overrides`)")
        key = self._checkpoint_key(chain, site)
        if key:  # `self.sliding_window` in a class that holds a checkpoint's config.json, or its `__init__` parameter
            # not `--hf-overrides`: vLLM applies those to the config object after it is built and checked
            return Setting(label=f"{code(key)} in the model's `config.json`")
        if hops and chain[0] == "self" and len(chain) > 1:
            held = self.attributes.get((_class_of(site), chain[1]))
            if held is not None:  # `self.size` set by `self.size = vllm_config.cache_config.block_size` in the class
                found = self.resolve(c.parse(held) if len(chain) == 2 else c.parse(f"({held}).{'.'.join(chain[2:])}"), site, hops - 1)
                if found:
                    return found
        value = self._local_value(chain[0], site) if hops else None
        looped = _loop_over(chain[0], site) if hops and len(chain) == 1 and value is None else None
        if looped is not None:  # `for x in compilation_config.compile_ranges_endpoints: assert x > 0`
            over = self.resolve(looped, site, hops - 1)
            return replace(over, label=f"each item of {_setting_words(over)}", flag=None, field=None, env=None) if over else None
        if value is None and len(chain) == 2 and chain[0] not in ("self", "cls") and self.program is not None:
            declared = self.program.request_field(self.program.parameter_class(site.path, site.function, chain[0]), chain[1])
            if declared:
                return _request_setting(declared, chain[1])
        if value is None and hops and len(chain) > 1 and chain[0] not in ("self", "cls") and self.program is not None:
            built = self._through_construction(chain, site, hops - 1)  # `config.moe_backend`, config: FusedMoEConfig
            if built:
                return built
        if value is None and hops and chain[0] not in ("self", "cls") and self.program is not None:
            passed = self._through_callers(chain, site, hops - 1)  # a parameter: what every caller passes for it
            if passed:
                return passed
        if value is not None:  # `cfg = self.vllm_config.cache_config` ... `cfg.block_size`: read through the local
            head = c.attribute_chain(value)
            copied = _copy_of(value, chain[1] if len(chain) > 1 else "")
            if copied:  # `vllm_config = replace(vllm_config, load_config=...)`: the other fields are the original's
                # the original by the same name is what the function was given, not the copy again
                at = Place(site.path, "") if copied[0] == chain[0] else site
                return self.resolve(c.parse(".".join(copied + chain[1:])), at, hops - 1)
            if head:
                return self.resolve(c.parse(".".join(head + chain[1:])), site, hops - 1)
            config = self._returned_config(value)
            if config and (config, chain[1] if len(chain) > 1 else "") in self.fields:
                return self._field_setting(config, chain[1:])  # `mm = model_config.get_multimodal_config()` ... `mm.x`
            return self.resolve(value, site, hops - 1) if len(chain) == 1 else None
        if len(chain) == 2 and chain[0] == "envs" and chain[1] in self.envs:
            return Setting(label=code(chain[1]), env=self.envs[chain[1]])
        owner = site.function.split(".")[0]
        if len(chain) == 2 and chain[0] == "self" and site.path in self.flag_paths:
            # EngineArgs, where the flags are declared, has one field per flag, named like it.
            flag = self.flags_by_field.get(chain[1])
            if flag:
                return Setting(label=code(chain[1]), flag=flag, field=self.fields.get((flag.config, flag.field)))
        for i in range(len(chain) - 2, -1, -1):
            part, field = chain[i], chain[i + 1]
            config = (
                owner if part == "self" and owner in self.configs and i == 0
                else self.holders.get(part) or _camel(part) if part.endswith("_config") else None
            )
            if config and (config, field) in self.fields:
                return self._field_setting(config, chain[i + 1 :])
        return None

    def _option(self, dest: str, site) -> Setting | None:
        """`args.num_runs`: the option of a command that sets it (`--num-runs` of `vllm bench sweep`), among the
        commands that load both the raising file and the file declaring the option; None where those options differ
        or no command loads both."""
        if self.program is None:
            return None
        running = set(self.program.commands(site.path))
        found = [(f, running & set(self.program.commands(f.path))) for f in self.options.get(dest, [])] if running else []
        found = [(f, commands) for f, commands in found if commands]
        names = {next(n for n in f.flags if n.startswith("--")) for f, _ in found}
        if len(names) != 1:
            return None
        commands = sorted(set().union(*(commands for _, commands in found)))
        shown = ", ".join(code(command) for command in commands[:MAX_COMMANDS])
        more = f" and {len(commands) - MAX_COMMANDS} more commands" if len(commands) > MAX_COMMANDS else ""
        return Setting(label=f"the {code(names.pop())} option of {shown}{more}")

    def _group_size(self, node: ast.expr) -> Setting | None:
        """`get_tensor_model_parallel_world_size()`, `get_pp_group().world_size`: the size of a parallel group, which
        is what its flag sets (`--tensor-parallel-size`)."""
        if isinstance(node, ast.Call) and not node.args:
            name = c.attribute_chain(node.func)
            field = _GROUP_SIZES.get(name[-1]) if name else None
        elif isinstance(node, ast.Attribute) and node.attr == "world_size" and isinstance(node.value, ast.Call) and not node.value.args:
            name = c.attribute_chain(node.value.func)
            field = _GROUPS.get(name[-1]) if name else None
        else:
            return None
        return self._field_setting("ParallelConfig", [field]) if field and ("ParallelConfig", field) in self.fields else None

    def _from_call(self, node: ast.Attribute) -> Setting | None:
        """`get_current_vllm_config().attention_config.x`: fields of the config a call is annotated to return."""
        rest: list[str] = []
        while isinstance(node, ast.Attribute):
            rest.insert(0, node.attr)
            node = node.value
        config = self._returned_config(node)
        return self._field_setting(config, rest) if config and (config, rest[0]) in self.fields else None

    def _raw_request_key(self, node: ast.expr, site) -> Setting | None:
        """`data.get("tool_choice")` or `data["tool_choice"]` in a validator of a request model that is handed the
        request's JSON before it is parsed (`@model_validator(mode="before")`): the request field of that name."""
        holder, method, key = _keyed(node)
        if method not in ("get", "[]"):
            return None
        owner = site.function.rpartition(".")[0].rpartition(".")[2]
        definition = self.program.definition(site.path, site.function) if self.program is not None and owner else None
        if definition is None or len(definition.params) < 2 or not isinstance(holder, ast.Name) or holder.id != definition.params[1]:
            return None
        declared = self.program.request_field(owner, key)
        return _request_setting(declared, key) if declared else None

    def _extra_config_key(self, node: ast.expr, site) -> Setting | None:
        """A key of a connector's free-form extra config: `kv_transfer_config.get_from_extra_config("k", d)`,
        `self.extra_config.get("k")` or `...kv_connector_extra_config["k"]` in a connector's code; the user writes it in
        the `kv_connector_extra_config` (or `ec_connector_extra_config`) of `--kv-transfer-config` (`--ec-transfer-config`)."""
        holder, method, key = _keyed(node)
        if not key.isidentifier():
            return None
        chain = c.attribute_chain(holder) or []
        if method == "get_from_extra_config":
            words = "_".join(chain)
        elif method in ("get", "[]") and chain and chain[-1].endswith("extra_config"):
            words = chain[-1]
        else:
            return None
        if "ec_" not in words and "kv_" not in words and self.program is not None:
            # a plain `extra_config`: whose it is, the connector whose code this is tells
            picked = {s.selector.key for s in selections(self.program.selected_by(site.path) or [], self.lever_exists) or []}
            words = "ec_" if picked == {"ec_connector"} else "kv_" if picked == {"kv_connector"} else ""
        config, field = ("ECTransferConfig", "ec_connector_extra_config") if "ec_" in words else \
            ("KVTransferConfig", "kv_connector_extra_config") if "kv_" in words else ("", "")
        holder_flag = self.json_flags.get(config)
        if not config or holder_flag is None or (config, field) not in self.fields:
            return None
        return Setting(label=f"{code(key)} in the {code(field)} of {code(holder_flag.flags[0])}")

    def _quantization_key(self, node: ast.expr, site) -> Setting | None:
        """`config.get("group_size")`, `config["bits"]` or `cls.get_from_keys(config, ["bits"])` in the `from_config` of
        a quantization method's config class, which is handed the checkpoint's quantization config as a dict."""
        owner, _, method = site.function.rpartition(".")
        if self.program is None or method != "from_config" or not self.program.derives(owner.rpartition(".")[2], {"QuantizationConfig"}):
            return None
        definition = self.program.definition(site.path, site.function)
        if definition is None or len(definition.params) < 2:
            return None
        holder, how, key = _keyed(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get_from_keys", "get_from_keys_or") \
                and len(node.args) >= 2:
            how, holder, keys = "keys", node.args[0], node.args[1]  # `cls.get_from_keys(config, ["bits", "w_bit"])`: the first found
            first = keys.elts[0] if isinstance(keys, (ast.List, ast.Tuple)) and keys.elts else None
            key = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
        elif how not in ("get", "[]"):
            return None
        if not key or not isinstance(holder, ast.Name) or holder.id != definition.params[1]:
            return None
        return Setting(label=f"{code(key)} in the model's quantization config ({QUANTIZATION_CONFIG})")

    def _holds_checkpoint_config(self, name: str, site) -> bool:
        """Whether a parameter holds a checkpoint's config: annotated with transformers' PretrainedConfig or a class built
        on it, in a function of the code that builds models (where vLLM hands each layer the model's config)."""
        if self.program is None or not _MODEL_CODE.match(site.path) or any(a.name == name for a in site.assignments):
            return False
        cls = self.program.parameter_class(site.path, site.function, name)
        return bool(cls) and self.program.derives(cls, _CHECKPOINT_CONFIG)

    def _checkpoint_key(self, chain: list[str], site) -> str:
        """The config.json key a name reads in a method of a class built on transformers' PretrainedConfig: `self.key`,
        or a parameter of its `__init__` (the keys arrive as its arguments); "" elsewhere."""
        owner, _, method = site.function.rpartition(".")
        if self.program is None or not owner or not self.program.derives(owner.rpartition(".")[2], _CHECKPOINT_CONFIG):
            return ""
        if len(chain) == 2 and chain[0] == "self" and not chain[1].startswith("_"):
            return chain[1]
        definition = self.program.definition(site.path, site.function) if method == "__init__" and len(chain) == 1 else None
        return chain[0] if definition and chain[0] in definition.params[1:] and not chain[0].startswith("_") else ""

    def _field_setting(self, config: str, rest: list[str]) -> Setting | None:
        """The setting `config.a.b...` reads: a field, a field of the config a field holds, or a key of the model's
        config.json; None when the chain goes on past a field into values no user sets by name."""
        field = rest[0]
        if len(rest) == 1:
            if self.program is not None and any(field in d.unset for d in self.program.classes(config)):
                return None  # `static_forward_context = field(init=False)`: vLLM fills it itself
            skipped = re.fullmatch(r"SkipValidation\[(\w+)\]", self.fields[(config, field)].type.strip())
            if skipped and skipped.group(1) in self.configs:
                return None  # `target_model_config: SkipValidation[ModelConfig]`: vLLM hands it the config it built
            flag = self.flags.get((config, field))
            if flag is None and self.fields[(config, field)].type.split("|")[0].strip() in self.configs and config not in self.json_flags:
                return None  # `vllm_config.cache_config`: a config vLLM builds, which no flag sets whole
            return Setting(label=self._field_label(config, field), flag=flag, field=self.fields[(config, field)])
        if field in CHECKPOINT_FIELDS and rest[1].isidentifier() and not rest[1].startswith("_") and len(rest) == 2:
            return Setting(label=f"{code(rest[1])} in the model's `config.json` (or `--hf-overrides`)")
        held = self.fields[(config, field)].type.split("|")[0].strip()  # `multimodal_config: MultiModalConfig | None`
        if held in self.configs and (held, rest[1]) in self.fields:
            return self._field_setting(held, rest[1:])
        return None

    def named_in(self, text: str) -> tuple[list[Setting], set[str]]:
        """The flags and VLLM_* variables of this release that a message names in its own words (its author's
        advice), and the names as the message writes them."""
        found: list[Setting] = []
        names: set[str] = set()
        for name in dict.fromkeys(MESSAGE_LEVER.findall(text)):
            flag = self.flags_by_name.get(name) or (self.flags_by_name.get("--" + name[5:]) if name.startswith("--no-") else None)
            if flag:
                field = self.fields.get((flag.config, flag.field)) if flag.config else None
                setting = Setting(label=code(flag.flags[0]), flag=flag, field=field)
            elif name in self.envs:
                setting = Setting(label=code(name), env=self.envs[name])
            else:
                continue
            names.add(name)
            if setting not in found:
                found.append(setting)
        return found, names

    def _returned_config(self, value: ast.expr) -> str:
        """The config class a call returns, by its callee's return annotation in the release: `get_multimodal_config()`."""
        if self.program is None or not isinstance(value, ast.Call):
            return ""
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        returned = self.program.returns(name) if name else ""
        return returned if returned in self.configs else ""

    def _field_label(self, config: str, field: str) -> str:
        """A config field as the user reaches it: a key of its JSON flag, or the field of its config class."""
        holder = self.json_flags.get(config)
        return f"{code(field)} in {code(holder.flags[0])}" if holder else code(f"{config}.{field}")

    def _through_callers(self, chain: list[str], site, hops: int) -> Setting | None:
        """The setting a parameter holds when every call of the function passes the same one; None otherwise."""
        calls = self.program.callers(site.path, site.function, chain[0])
        return self._agreed(calls, chain[1:], hops, "more calls pass the same",
                            lambda passed: f"{code(passed.call.caller or '<module>')} passes {code(passed.argument)} "
                                           f"({passed.path}:{passed.call.line})")

    def _through_construction(self, chain: list[str], site, hops: int) -> Setting | None:
        """A field of a parameter annotated with a class of the release (`config: FusedMoEConfig` ... `config.moe_backend`):
        the setting every call that makes one passes for that field (`FusedMoEConfig(moe_backend=vllm_config.
        kernel_config.moe_backend)`); None otherwise."""
        cls = self.program.parameter_class(site.path, site.function, chain[0])
        made = self.program.constructions(cls, chain[1]) if cls else None
        return self._agreed(made, chain[2:], hops, "more calls make it the same way",
                            lambda built: f"{code(cls)} is made with {code(f'{chain[1]}={built.argument}')} ({built.path}:{built.call.line})")

    def _agreed(self, sites, rest: list[str], hops: int, more: str, said: Callable) -> Setting | None:
        """The one setting every call site passes (the argument, followed by `rest` of the chain, read in the
        caller's place), with the sites said as the reason; None when one passes anything else, or there are none."""
        found: Setting | None = None
        for passed in sites or ():
            value = parse_text(passed.argument) if passed.argument else None
            head = c.attribute_chain(value) if value is not None else None
            node = c.parse(".".join(head + rest)) if head else value if not rest else None
            setting = self.resolve(node, Place(passed.path, passed.call.caller), hops) if node is not None else None
            if setting is None or found is not None and setting.name != found.name:
                return None  # one call passes something else: the setting decides only some paths
            found = replace(setting, via=(*(found.via if found else setting.via), said(passed)))
        if found and len(found.via) > MAX_VIA:
            found = replace(found, via=(*found.via[:MAX_VIA], f"{len(found.via) - MAX_VIA} {more}"))
        return found

    def _local_value(self, name: str, site) -> ast.expr | None:
        """The value a local variable the guard reads was assigned, where the site recorded one plain `name = value`,
        or the program knows it is assigned once in that function."""
        if name in ("self", "cls"):
            return None
        if self.program is not None and not any(a.name == name for a in site.assignments):
            bound = self.program.binding(site.path, site.function, name)
            return parse_text(bound) if bound is not None else None
        for assignment in site.assignments:
            if assignment.name != name:
                continue
            stmt = parse_statement(assignment.code.strip())
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name:
                return stmt.value
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                return stmt.value
            return None
        return None


def _handler(site: RaiseSite) -> Condition | None:
    """The innermost `except` the raise is in."""
    return next((cond for cond in reversed(site.guard) if cond.kind == "except"), None)


def _caught_types(handler: Condition) -> list[str]:
    """The last names of the classes an `except` condition catches; [] for a bare `except:`."""
    node = parse_text(handler.code) if handler.code else None
    found = node.elts if isinstance(node, ast.Tuple) else [node] if node is not None else []
    return [".".join(c.attribute_chain(n)).rpartition(".")[2] for n in found if c.attribute_chain(n)]


def _call_text(call) -> str:
    """A call as a page names it: `self.server.start(...)`, `load(...)`."""
    head = f"{call.receiver}." if call.receiver else "…." if call.method else ""
    return f"{head}{call.name}(…)"


def _type_test(node: ast.expr) -> bool:
    """`isinstance(x, int)`, or its negation."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node = node.operand
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def parse_statement(text: str) -> ast.stmt | None:
    try:
        body = ast.parse(textwrap.dedent(text)).body
    except (SyntaxError, ValueError):
        return None
    return body[0] if body else None


def _holding(guard: list) -> list:
    """The conditions that hold where the raise runs, each as the expression that is true there."""
    return [(cond, node if cond.holds else c.negate(node)) for cond, node in guard if cond.kind in _HOLDING and node is not None]


def _machine_reads(holding: list) -> list[str]:
    """What the machine has that the raise's conditions read (`HAS_TRITON`, `has_deep_ep_v2()`), in order."""
    subs = [sub for _, node in holding for sub in ast.walk(node)]
    called = {id(sub.func) for sub in subs if isinstance(sub, ast.Call)}
    # plain names only: a method of some object (`mode.has_full_cudagraphs()`) says nothing of the machine
    names = [(sub.id, id(sub) in called) for sub in subs if isinstance(sub, ast.Name)]
    # `current_platform.is_device_capability_family(100)`: the GPU it runs on
    platform = [f"current_platform.{sub.func.attr}" for sub in subs if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                and _PLATFORM_CALL.match(sub.func.attr) and c.attribute_chain(sub.func.value) == ["current_platform"]]
    return list(dict.fromkeys([*(name for name, call in names if _MACHINE.search(name) or call and _MACHINE_CALL.search(name)), *platform]))


def _calls_said(calls: list[tuple[str, object]]) -> str:
    """The first calls of a function, each as its caller and place, and how many more: "`f` (path:12); 2 more"."""
    places = list(dict.fromkeys((path, call.caller, call.line) for path, call in calls))  # two calls on one line are one place
    shown = "; ".join(f"{code(caller or '<module>')} ({path}:{line})" for path, caller, line in places[:MAX_VIA])
    return shown + (f"; {len(places) - MAX_VIA} more" if len(places) > MAX_VIA else "")


def _takes(handlers: tuple[tuple[str, int], ...], names: set[str]) -> bool:
    """Whether one of the handlers, (the class it catches, its line), takes an exception of `names` (`*`: a bare `except:`)."""
    return any(name in names or name == "*" for name, _ in handlers)


def _tells_user(exception: str) -> bool:
    """An exception type made to tell a user what to fix in a request or an input."""
    return "Validation" in exception or "HTTPException" in exception


def _request_setting(declared: str, field: str) -> Setting:
    """A field of a request model or of SamplingParams (what LLM.generate or the request sets), as a setting."""
    if declared in REQUEST_CLASSES:
        return Setting(label=f"{code(declared + '.' + field)} (the request's {code(field)})")
    return Setting(label=f"the request field {code(field)} (`{declared}`)")


def _lines_parsed(site: RaiseSite, first: int, last: int) -> ast.Module | None:
    """Lines `first`..`last` of the site's file, from the code kept around it, parsed as a block of their own; None
    where they are not all kept or do not parse alone."""
    if first < site.code.first_line:
        return None
    lines = site.code.text.splitlines()[first - site.code.first_line : last - site.code.first_line + 1]
    try:
        return ast.parse(textwrap.dedent("\n".join(lines)))
    except (SyntaxError, ValueError):
        return None


def _keyed(node: ast.expr) -> tuple[ast.expr | None, str, str]:
    """`holder.method("key", ...)` as (holder, "method", "key"), `holder["key"]` as (holder, "[]", "key");
    (None, "", "") for any other expression."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        holder, method, key = node.func.value, node.func.attr, node.args[0]
    elif isinstance(node, ast.Subscript):
        holder, method, key = node.value, "[]", node.slice
    else:
        return None, "", ""
    return (holder, method, key.value) if isinstance(key, ast.Constant) and isinstance(key.value, str) else (None, "", "")


# The parallel groups of vllm.distributed, and the ParallelConfig field that sets each one's size.
_GROUPS = {"get_tp_group": "tensor_parallel_size", "get_pp_group": "pipeline_parallel_size", "get_dp_group": "data_parallel_size"}
_GROUP_SIZES = {"get_tensor_model_parallel_world_size": "tensor_parallel_size", "get_pipeline_model_parallel_world_size": "pipeline_parallel_size"}

_VALIDATORS = ("field_validator", "model_validator")  # pydantic's: what they raise reaches the user inside a ValidationError

_COPIES = (["replace"], ["dataclasses", "replace"], ["copy", "copy"], ["copy", "deepcopy"])


def _copy_of(value: ast.expr, field: str) -> list[str] | None:
    """The dotted name a copy is made of (`replace(vllm_config, load_config=x)`, `copy.copy(cfg)`), when the copy
    keeps `field` as it was; None for other values."""
    if not (isinstance(value, ast.Call) and c.attribute_chain(value.func) in _COPIES and value.args):
        return None
    if field and any(k.arg in (field, None) for k in value.keywords):
        return None  # the copy is given a new value of it (or `**changes`, which may hold it)
    return c.attribute_chain(value.args[0]) or None


def _switch(setting: Setting) -> bool:
    """Whether a setting is turned on or off: a field typed `bool`, a flag of no config field (`store_true`), a
    variable of envs.py (most are flags; each is parsed to its type there)."""
    if setting.field is not None:
        return re.search(r"\bbool\b", setting.field.type) is not None
    return setting.flag is not None or setting.env is not None or _SWITCH_NAME.match(setting.label) is not None


# A key named as a switch (`tie_word_embeddings`, `use_qk_norm`, `load_async`): a config.json's or a JSON flag's key has
# no type to tell, its name does.
_SWITCH_NAME = re.compile(r"^`(?:use|enable|disable|is|has|tie|apply|allow|skip|force|load|do|return)_[a-z0-9_]*`")


_COLLECTION = re.compile(r"\b(?:list|dict|tuple|set|List|Dict|Tuple|Set|Sequence|Mapping)\b|^\s*str\b|\|\s*str\b")
_NUMBER = re.compile(r"\b(?:int|float|PositiveInt|NonNegativeInt|PositiveFloat|NonNegativeFloat)\b")


def _type_words(setting: Setting) -> tuple[str, str]:
    """What besides unset makes a setting that is no switch false, and what a value must be to be true, by its
    field's type (a list before the numbers it may hold); for an untyped key, any of what Python counts false."""
    kind = setting.field.type if setting.field is not None else ""
    if _COLLECTION.search(kind):
        return " (or empty)", " that is not empty"
    if _NUMBER.search(kind):
        return " (or 0)", " other than 0"
    return ("", "") if kind else (", or give it an empty, zero or false value", " that is not empty, zero or false")


def _present(node: ast.expr) -> bool:
    """`hasattr(x, "k")`: a test of whether something is there, not of its value."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr" and len(node.args) == 2


def _falsy(setting: Setting) -> str:
    return _type_words(setting)[0]


def _truthy(setting: Setting) -> str:
    return _type_words(setting)[1]


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _stub(error: ErrorEntry, site: RaiseSite, holding: list) -> bool:
    """A method that raises NotImplementedError whatever it is given."""
    return short_name(error.exception) == "NotImplementedError" and "." in site.function and not holding


def _first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]


def _documented(setting: Setting) -> str:
    """The first sentence of vLLM's own documentation of a setting, as " (...)"; "" where it has none."""
    doc = setting.field.doc if setting.field else setting.env.doc if setting.env else None
    first = _first_sentence(" ".join(doc.split())) if doc else ""
    return f" ({doc_md(first)})" if first else ""


def _literals(options: list[ast.expr]) -> frozenset[str]:
    """The literals the ways out of a raise compare with: a value among them does not raise."""
    found = set()
    for option in options:
        for node in ast.walk(option):
            if isinstance(node, ast.Compare):
                for right in node.comparators:
                    items = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
                    found.update(c.src(x) for x in items if c.is_literal(x))
    return frozenset(found)


def _loop_over(name: str, site) -> ast.expr | None:
    """The iterable of the `for` around the raise whose target is `name` (`for x in xs`, `for i, x in enumerate(xs)`)."""
    for cond in reversed(getattr(site, "guard", ())):
        if cond.kind != "for":
            continue
        try:
            test = ast.parse(cond.code, mode="eval").body
        except (SyntaxError, ValueError):
            continue
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In)):
            continue
        target, iterable = test.left, test.comparators[0]
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "enumerate" and iterable.args:
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target, iterable = target.elts[1], iterable.args[0]
        if isinstance(target, ast.Name) and target.id == name:
            return iterable
    return None


def _origin(assignment) -> str:
    """Where a local comes from, said as its statement allows: `x = v`, `a, x = v, w`, `x += 1`; "" otherwise."""
    name = assignment.name
    stmt = parse_statement(assignment.code.strip())
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        return f"{code(name)} is updated by {code(one_line(assignment.code.strip()))}."
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
        return f"{code(name)} is set by {code(ast.unparse(stmt.value))}."
    if not isinstance(stmt, ast.Assign):
        return ""
    for target in stmt.targets:
        if isinstance(target, ast.Name) and target.id == name:
            return f"{code(name)} is set by {code(ast.unparse(stmt.value))}."
        if isinstance(target, (ast.Tuple, ast.List)):
            names = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
            if name not in names:
                continue
            if isinstance(stmt.value, (ast.Tuple, ast.List)) and len(stmt.value.elts) == len(names):
                return f"{code(name)} is set by {code(ast.unparse(stmt.value.elts[names.index(name)]))}."
            return f"{code(name)} is unpacked from {code(ast.unparse(stmt.value))}."
    return ""


def _setting_words(setting: Setting) -> str:
    if setting.flag:
        return f"{code(setting.flag.flags[0])} (`{setting.field.config}.{setting.field.name}`)" if setting.field else code(setting.flag.flags[0])
    if setting.env:
        return f"the environment variable {code(setting.env.name)}"
    return setting.label


def _as_typed(node: ast.expr, setting: Setting | None) -> ast.expr:
    """What the user types for a value the code compares with after resolving it: `torch.bfloat16` is `bfloat16` to
    `--dtype`, where that is one of the flag's choices; any other node as it is."""
    if (setting is not None and setting.field is not None and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "torch" and any(choice.strip("'\"") == node.attr for choice in setting.field.choices)):
        return ast.Constant(node.attr)
    return node


def _value(node: ast.expr) -> str:
    """A literal as a user types it on a command line."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return c.src(node)


def _quoted(sentence: str, names: set[str]) -> str:
    """A sentence of a message as Markdown: the flags and variables of `names` as code, its values as "…"."""
    text = _valued(sentence.replace("`", "")).strip()
    pieces, at = [], 0
    for found in MESSAGE_LEVER.finditer(text):
        if found.group() not in names:
            continue
        pieces += [_spaced(text[at : found.start()]), code(found.group())]
        at = found.end()
    return "".join(pieces) + _spaced(text[at:])


def _valued(template: str) -> str:
    """A template with each placeholder, however nested its braces, as "…"."""
    out, depth = [], 0
    for ch in template:
        if ch == "{":
            if depth == 0:
                out.append("…")
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _spaced(text: str) -> str:
    """md() of a piece between code spans, keeping the spaces at its ends that md() folds away."""
    return (" " if text[:1].isspace() else "") + md(text) + (" " if text[-1:].isspace() and text.strip() else "")


def _setting_note(setting: Setting) -> str:
    notes = [f"it reaches this code as a parameter: {'; '.join(setting.via)}"] if setting.via else []
    if setting.field and setting.field.default not in (None, "None"):
        notes.append(f"default {code(setting.field.default)}")
    if setting.field and setting.field.choices:
        shown = ", ".join(code(x) for x in setting.field.choices[:8])
        notes.append(f"one of {shown}{', …' if len(setting.field.choices) > 8 else ''}")
    if setting.env and setting.env.default:
        notes.append(f"default {code(setting.env.default)}")
    text = f" ({'; '.join(notes)})" if notes else ""
    if setting.env and setting.env.doc:
        text += f". {code(setting.env.name)}: {md(setting.env.doc)}"
    return text


class Deriver:
    def __init__(self, catalog: Catalog) -> None:
        self.settings = Settings(catalog)
        self.classes = catalog.exception_classes
        self.class_table = {cls.qualname: cls for cls in self.classes}
        self._bases: dict[str, tuple[str, ...]] = {}
        # The errors raised in an `except` block, by (file, the handler's line): what a caller raises in place of an
        # error it catches there, or passes on.
        self.raised_in_handler: dict[tuple[str, int], list[tuple[ErrorEntry, RaiseSite, Condition]]] = {}
        for other in catalog.errors:
            for at in other.sites:
                handler = _handler(at)
                if handler is not None:
                    self.raised_in_handler.setdefault((at.path, handler.line), []).append((other, at, handler))

    def __call__(self, error: ErrorEntry) -> Annotation:
        site = error.sites[0]
        guard = [(cond, c.parse(cond.code)) for cond in site.guard]
        holding = _holding(guard)
        settings = list(dict.fromkeys(s for _, node in holding for s in self._settings_in(node, site)))
        checked = self.checked_by_callers(site, holding)
        lacking = self._lacking_everywhere(error, site, holding)
        machine = _machine_reads(holding)
        checkpoint = not settings and self.reads_checkpoint(site, holding)
        computed = None if settings or checked or machine or checkpoint or _tells_user(error.exception) else self.computed_inside(site, holding)
        refused = self.refused(error, site, holding)
        kind = self.kind(error, settings, holding, checked, lacking, computed, machine, checkpoint, refused)
        triggers = self.triggers(site, guard)
        selected = self.selected(site)
        solutions, fix = ([], None) if kind in ("internal", "abstract", "control") else self.solutions(site, holding)
        if kind == "internal":  # no setting breaks the check itself; one may still keep the code from running
            around, _ = self.solutions(site, [(cond, node) for cond, node in holding if cond.kind != "assert"])
            around += ways_around(selected)
            solutions = [f"Until it is fixed, a way around it: {w[:1].lower() + w[1:]}" for w in around]
        if kind not in ("internal", "control") and not solutions:
            solutions = (self.advice(error) + self.logged_advice(error, site) + self.rejected_field(error, site)
                         + (CHECKPOINT_ADVICE if checkpoint else []) + self.fallback_solutions(error, site, kind))
        if site.exception.how == "reraise" and not solutions:
            solutions = [REPASSED]
        gate = self.gated(site) if kind not in ("abstract", "control") else None
        if gate and gate.setting in {s.name for s in settings}:
            gate = None  # the check itself reads that setting: its own solutions say what to do with it
        if gate and not any(s.startswith(gate.way[:-1]) for s in solutions):  # it keeps the code from running: no fix
            way = gate.way[:1].lower() + gate.way[1:-1]
            solutions.append(f"{'Until it is fixed, a' if kind == 'internal' else 'A'} way around it: {way}: {gate.why}")
        if kind not in ("internal", "abstract", "control"):
            solutions += [w for w in ways_around(selected) if w not in solutions]
        solutions = solutions[:MAX_SOLUTIONS]
        sources = {name: "derived" for name, value in (("triggers", triggers), ("solutions", solutions), ("example_fix", fix)) if value}
        phases = self.phases(site, frozenset(self._catching(error)))
        # the phase the raising function is itself goes in the meaning, with what it ends; those that reach it, below
        direct = next(((when, said) for when, said, hops in phases if not hops), ("", ""))
        inherited = None if direct[0] else self.inherited_phase(site.path, site.function)
        if inherited:  # every call of it is made in one phase: it runs in that one, and the sentence names the calls
            when, callers = inherited
            direct = (when, f"It runs {when}: vLLM calls it from {_calls_said(callers)}.")
            phases = [p for p in phases if p[0] != when]
        meaning = self.meaning(error, site, kind, settings, checked, lacking, computed, machine, selected, checkpoint, refused, direct,
                               callers_said=bool(inherited))
        # what the user sees in the error's place: a handler's log line, or the error raised instead
        caught, logged = self.caught_in_place(error, site)
        if not caught:
            caught, logged = self.caught_by_callers(error, site)
        meaning = " ".join(p for p in (meaning, caught, self.wrapped_by_callers(error, site)) if p) or None
        if gate:
            meaning = f"{meaning} {gate.said}" if meaning else gate.said
        if meaning:
            sources["meaning"] = "derived"
        situations = [said for _, said, hops in phases if hops]
        if situations:
            sources["situations"] = "derived"
        return Annotation(
            meaning=meaning,
            situations=tuple(situations),
            triggers=tuple(triggers),
            solutions=tuple(solutions),
            example_fix=fix,
            kind=kind,
            sources=sources,
            logged=logged,
        )

    def _settings_in(self, node: ast.expr, site: RaiseSite) -> list[Setting]:
        found = []
        heads = {id(sub.value) for sub in ast.walk(node) if isinstance(sub, ast.Attribute)}
        settled: set[int] = set()  # heads of a chain that named a setting: `vllm_config.attention_config` of `....x`
        for sub in ast.walk(node):  # outer nodes first: a whole chain before its heads
            # `block_size` (a parameter, a local) and `self.cache_config.block_size`; not `cache_config` alone
            if id(sub) in settled:
                continue
            if isinstance(sub, (ast.Attribute, ast.Call, ast.Subscript)) or isinstance(sub, ast.Name) and id(sub) not in heads:
                setting = self.settings.resolve(sub, site)
                if setting and isinstance(sub, ast.Attribute):
                    head = sub.value
                    while isinstance(head, ast.Attribute):
                        settled.add(id(head))
                        head = head.value
                if setting and setting not in found:
                    found.append(setting)
        return found

    def kind(self, error: ErrorEntry, settings: list[Setting], holding: list, checked: list | None = None, lacking: bool = False,
             computed: tuple | None = None, machine: list[str] = (), checkpoint: bool = False, refused: bool = False) -> str:
        exc = short_name(error.exception)
        site = error.sites[0]
        if _INTERNAL.search(error.template or ""):
            return "internal"
        if exc in _CONTROL_TYPES:
            return "control"  # raised to end a loop, a task or a process, not to report a failure
        handler = _handler(site)
        caught = set(_caught_types(handler)) if handler is not None else set()
        if site.exception.how == "reraise":  # the caught exception goes on, unchanged: no failure of its own
            return "environment" if caught and caught <= _CAUGHT_ENVIRONMENT else "control"
        if _stub(error, site, holding) and not _LIMITATION.search(error.template or "") and not lacking and not refused:
            return "abstract"  # a method of a base class whose subclasses provide their own
        if checked:
            return "internal"  # every call in vLLM runs only where the check cannot fail: the callers checked first
        if not settings and machine and not self.settings.named_in(error.template or "")[0]:
            return "environment"  # what it checks is what the machine has installed or attached (where no flag is the remedy)
        if checkpoint:
            return "user"  # what it checks is the checkpoint's tensors: the model the user serves
        if error.kind == "assert":
            # An assert is the user's when a setting is in what it checks, not merely in the branch it sits in.
            tested = [s for cond, node in holding if cond.kind == "assert" for s in self._settings_in(node, site)]
            if tested or _LIMITATION.search(error.template or ""):
                return "user"
            return "environment" if exc in _ENVIRONMENT_TYPES or _ENVIRONMENT.search(error.template or "") else "internal"
        if settings or self.settings.named_in(error.template or "")[0]:
            return "user"
        if exc in _ENVIRONMENT_TYPES or _ENVIRONMENT.search(error.template or "") or _TIMED_OUT.search(error.template or ""):
            return "environment"
        # A type alone does not make an error the user's: a ValueError also guards vLLM's own invariants.
        typed = short_name(error.exception) in _USER_TYPES or _tells_user(error.exception)
        if typed and _LIMITATION.search(error.template or ""):
            return "user"
        if computed:
            return "internal"  # what it checks is vLLM's own tensors or a kernel's parameters, and vLLM's code calls it
        if "Validation" in exc:
            return "user"  # vLLM's VLLMValidationError is made for what a request gets wrong
        if caught and caught <= _CAUGHT_ENVIRONMENT:
            return "environment"  # it reports that a file, a socket, a process or a library failed
        return "unknown"

    def triggers(self, site: RaiseSite, guard: list) -> list[str]:
        words = []
        for cond, node in guard:
            if cond.kind == "except":
                caught = code(cond.code) if cond.code else "any exception"
                cause = ("; `from None` hides the original error" if site.cause == "None" else
                         f"; the original error is chained as its cause ({code(site.cause)})" if site.cause else "")
                words.append(f"while handling {caught}{cause}")
            elif cond.kind == "for":
                words.append(f"inside the loop over {code(cond.code)}")
            elif node is not None:
                words.append(c.say(node if cond.holds else c.negate(node)))
        if not words:
            where = code(site.function) if site.function != "<module>" else f"the import of {code(site.path)}"
            # no `if` or `assert` around it; a loop that returns when it finds something may still come first
            return [f"Raised when {where} reaches line {site.line}: no `if` or `assert` around the raise guards it, so whether it "
                    "runs is decided by what returns or raises before that line (a loop that returns when it finds what it "
                    "looks for, a check that raises first)."]
        if any(w.startswith(("while ", "inside ")) for w in words):  # "Raised while handling `X`; and when `y` is set."
            sentence = "Raised " + "; and ".join(w if w.startswith(("while ", "inside ")) else f"when {w}" for w in words) + "."
        else:
            sentence = "Raised when " + "; and ".join(words) + "."
        origins = self._origins(site, [node for _, node in guard if node is not None])
        if origins:
            sentence += " " + " ".join(origins)
        shown = [cond.code if cond.holds else f"not ({one_line(cond.code)})" for cond, _ in guard if cond.kind in _HOLDING]
        if shown:
            sentence += " In code: " + " and ".join(code(one_line(s)) for s in shown) + "."
        return [sentence]

    def _origins(self, site: RaiseSite, nodes: list[ast.expr]) -> list[str]:
        """Where the guard's local names come from: `use_mla` is set by `mla_enabled(model_config)`; the value of a
        module constant it compares with: `MAX_LOGPROB_TOKEN_IDS` is `128` (vllm/sampling_params.py:40)."""
        said = []
        program = self.settings.program
        definition = program.definition(site.path, site.function) if program is not None else None
        params = set(definition.params) if definition is not None else set()
        names = dict.fromkeys(n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name))
        for name in names:
            found = program.constant(site.path, name) if program is not None and name not in params else None
            if found and not any(a.name == name for a in site.assignments):
                said.append(f"{code(name)} is {code(found[0])} ({found[1]}:{found[2]}).")
        rebound = set(definition.rebound) if definition is not None else set()
        for assignment in site.assignments:
            if assignment.name in ("self", "cls") or assignment.name in params:
                continue  # a parameter set again somewhere in the function: what the callers pass decides it too
            if definition is not None and assignment.line < definition.line:
                continue  # a module's name (`pd`, bound by an import or in an `except ImportError`): no one value
            origin = _origin(assignment)
            if origin.endswith(" is set by `None`.") and any(f"{assignment.name} is not None" in (g.code or "") for g in site.guard):
                continue  # set to None in some branch, while the raise needs a value: it comes from elsewhere
            if any(origin.endswith(f" is set by `{empty}`.") for empty in _EMPTY):
                continue  # a list or a dict filled later (`.append`): its start says nothing
            if origin and assignment.name in rebound:
                origin = f"{origin[:-1]} at line {assignment.line}, among other assignments."
            if origin:
                said.append(origin)
        return said[:4]

    def solutions(self, site: RaiseSite, holding: list[tuple[Condition, ast.expr]]) -> tuple[list[str], ExampleFix | None]:
        """Each way to make the guard false (the negation's disjuncts), most specific first.

        The negation of `a and b` is `not a or not b`, so each condition is negated on its own.
        An early exit (`if engine := find(): return engine`) is a way out only when it tests a
        setting or compares with a value; "make find() return something" helps nobody.
        """
        options = []
        for cond, node in holding:
            for option in c.disjuncts(c.negate(node)):
                if cond.kind != "exit" or c.specificity(option) >= 3 or self._settings_in(option, site):
                    options.append(option)
        options.sort(key=lambda n: -c.specificity(n))
        solutions, fix = [], None
        for option in options[:MAX_SOLUTIONS]:
            text, setting = self.action(option, site)
            if setting is None:
                continue  # "Make `reg_nbytes` at most `nbytes`": a variable of vLLM's is no lever a user holds
            if text not in solutions:
                solutions.append(text)
            if fix is None:
                fix = self.example_fix(option, setting, _literals(options))
        return solutions, fix

    def advice(self, error: ErrorEntry, text: str | None = None, says: str = "the message says") -> list[str]:
        """The sentences of the message (or of `text`) that name a flag or a VLLM_* variable of this release: what
        its author tells the user to change, each with the setting's config field and default."""
        found, told = [], []
        for sentence in SENTENCE_END.split(error.template or "" if text is None else text):
            named, names = self.settings.named_in(sentence)
            if named and len(found) < MAX_ADVICE:
                about = "; ".join(f"{_setting_words(n)}{_setting_note(n)}" for n in named)
                found.append(f"Do what {says}: “{_quoted(sentence, names)}” ({about}).")
            elif text is None and _ADVISING.search(sentence.strip()) and "{" not in sentence:  # "Use a checkpoint that includes ..."
                # (the message's own sentences only: what a handler logs is read as the pieces of its f-strings)
                told.append(f"Do what {says}: “{md(sentence.strip())}”")
        return (found + told)[:MAX_ADVICE]

    def logged_advice(self, error: ErrorEntry, site: RaiseSite) -> list[str]:
        """What the `except` block around the raise logs before it raises (`logger.error("... Try lowering
        --gpu-memory-utilization ...")`; raise e`): the sentences that name a flag or a VLLM_* variable."""
        handler = _handler(site)
        if handler is None or handler.line >= site.line:
            return []
        body = _lines_parsed(site, handler.line + 1, site.line - 1)
        if body is None:
            return []
        texts = [n.value for n in ast.walk(body) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        return self.advice(error, " ".join(texts), "vLLM logs as it raises this") if texts else []

    def rejected_field(self, error: ErrorEntry, site: RaiseSite) -> list[str]:
        """`raise VLLMValidationError(..., parameter="max_tokens")`: the request field the raise names as rejected,
        where a request model of the release declares it."""
        program = self.settings.program
        if program is None or "Validation" not in error.exception:
            return []
        parsed = _lines_parsed(site, site.line, site.end_line)
        stmt = parsed.body[0] if parsed is not None and parsed.body else None
        raised = stmt.exc if isinstance(stmt, ast.Raise) else None
        keywords = {k.arg: k.value for k in raised.keywords} if isinstance(raised, ast.Call) else {}
        named = keywords.get("parameter")
        if not (isinstance(named, ast.Constant) and isinstance(named.value, str)):
            return []
        if not program.request_model_with(named.value):
            return []
        # many request models declare the same field (`top_logprobs`): the error names the field, not the model
        return [f"Change the request field {code(named.value)}, or leave it out: it is the one this error rejects (the raise "
                "names it)."]

    def fallback_solutions(self, error: ErrorEntry, site: RaiseSite, kind: str) -> list[str]:
        """What the code still tells when no condition can be negated: the chained cause, the method to provide."""
        if site.exception.how == "reraise":
            return []  # the caught exception itself goes on: its own traceback says where it came from
        if kind == "abstract":
            cls, _, method = site.function.rpartition(".")
            # Whether a class vLLM picks lacks it is the whole program's question; a plugin's own class is its author's.
            if self._abstract(site):
                return [f"If the class in use is your own (a plugin, a custom model, platform, backend or connector), its "
                        f"{code(method)} must not call {code('super().' + method)}: {code(cls)} has no implementation of it."]
            return [f"If the class in use is your own (a plugin, a custom model, platform, backend or connector), give it "
                    f"its own {code(method)}: {code(cls)} leaves it to the classes built on it."]
        handler = _handler(site)
        if handler is not None and site.cause != "None":  # `from None`: the message is all there is of it
            caught = code(handler.code) if handler.code else "exception"
            return [f"Find the {caught} this error was raised while handling (above it in the traceback, or in its own message where "
                    "the traceback is not printed): it is what failed, and this error only reports it."]
        # A NotImplementedError stub gets none: whether any class vLLM picks lacks the method is a question of the
        # whole program (an abstract method cannot be left out by an in-tree class), not of this function.
        return []

    def action(self, node: ast.expr, site: RaiseSite) -> tuple[str, Setting | None]:
        """One way to make the guard false, said as something to do."""
        divides = self._divisibility(node, site)
        if divides:
            return divides
        if isinstance(node, ast.Compare) and len(node.ops) == 2 and all(isinstance(op, (ast.Lt, ast.LtE)) for op in node.ops):
            setting = self.settings.resolve(node.comparators[0], site)  # `-2.0 <= x <= 2.0`: a range
            if setting:
                low = {ast.Lt: "above", ast.LtE: "at least"}[type(node.ops[0])]
                high = _BOUNDS[type(node.ops[1])]
                return (f"Make {_setting_words(setting)} {low} {code(c.src(node.left))} and {high} {code(c.src(node.comparators[1]))}"
                        f"{_setting_note(setting)}."), setting
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            # `isinstance(x, int) and x >= 1`: every part a setting's; a type is what the rest says of it already
            said = [self.action(v, site) for v in node.values if not _type_test(v)]
            if said and all(setting for _, setting in said):
                texts = [text.rstrip(".") for text, _ in said]
                return ", and ".join([texts[0], *(t[:1].lower() + t[1:] for t in texts[1:])]) + ".", said[0][1]
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            op, right = type(node.ops[0]), node.comparators[0]
            setting = self.settings.resolve(node.left, site)
            name = _setting_words(setting) if setting else code(c.src(node.left))
            note = _setting_note(setting) if setting else ""
            right = _as_typed(right, setting)
            if c.is_none(right) and setting and setting.env and setting.env.default not in (None, "None"):
                return "", None  # unset, the variable has its default: None comes from what envs.py computes of it
            if c.is_none(right) and setting and "config.json" in setting.label and op in (ast.IsNot, ast.NotEq):
                # the code needs the key: the checkpoint in use leaves it out, and the user picks the checkpoint
                key, _, rest = setting.label.partition(" in the model's ")
                where = "quantization config" if rest.startswith("quantization config") else "`config.json`"
                overrides = ", or add it with `--hf-overrides`" if "`--hf-overrides`" in setting.label else ""
                return (f"Use a checkpoint whose {where} gives {key} a value (this code needs it; the one in use leaves it out)"
                        f"{overrides}."), setting
            if c.is_none(right) and setting and "config.json" in setting.label:
                return "", None  # whether the checkpoint has the key is the model's design, not a choice of the user's
            if c.is_none(right) and op in (ast.Is, ast.Eq):
                return f"Leave {name} unset (None){note}.", setting
            if c.is_none(right):
                return f"Give {name} a value (it must not be None){note}.", setting
            if setting and setting.flag and c.is_literal(right) and op is ast.Eq:
                return f"Pass {code(f'{setting.flag.flags[0]} {_value(right)}')}{note}.", setting
            if op in (ast.Eq, ast.Is):
                return f"Set {name} to {code(c.src(right))}{note}.", setting
            if op in (ast.NotEq, ast.IsNot):
                return f"Use a value of {name} other than {code(c.src(right))}{note}.", setting
            if op in (ast.In, ast.NotIn):
                items = c._items(right)
                items += self._constant_value(right, site)  # `_SUPPORTED_PAGE_SIZES` is `(64, 128)`
                return (f"Set {name} to one of {items}{note}." if op is ast.In else f"Use a value of {name} that is not one of {items}{note}."), setting
            bound = _BOUNDS[op]
            return f"Make {name} {bound} {code(c.src(right))}{self._constant_value(right, site)}{note}.", setting
        if _present(node) or isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and _present(node.operand):
            held = _present(node)  # `hasattr(config, "k")`: whether the key is there at all, whatever its value
            setting = self.settings.resolve(node if held else node.operand, site)
            if setting:
                return (f"Give {_setting_words(setting)} a value (any value: what is checked is that it is there){_setting_note(setting)}."
                        if held else f"Leave {_setting_words(setting)} out{_setting_note(setting)}."), setting
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            setting = self.settings.resolve(node.operand, site)
            if setting and setting.label.startswith("the environment variable"):  # read as a string: set or empty
                return f"Unset {_setting_words(setting)} (or leave it empty){_setting_note(setting)}.", setting
            if setting and _switch(setting):
                return f"Turn off {_setting_words(setting)}{_setting_note(setting)}.", setting
            if setting:  # a number, a string, a list: what is false of it
                return f"Leave {_setting_words(setting)} unset{_falsy(setting)}{_setting_note(setting)}.", setting
            origin = self._origin_of(node.operand, site)
            return f"Make {code(c.src(node.operand))} false{origin}.", None
        if _type_test(node) and not isinstance(node, ast.UnaryOp) and len(node.args) == 2 and all(  # `isinstance(x, dict)`
                isinstance(t, ast.Name) for t in (node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]])):
            setting = self.settings.resolve(node.args[0], site)
            if setting:
                return f"Give {_setting_words(setting)} a value of type {c._items(node.args[1])}{_setting_note(setting)}.", setting
        setting = self.settings.resolve(node, site)
        if setting and setting.label.startswith("the environment variable"):
            return f"Set {_setting_words(setting)} to a value that is not empty{_setting_note(setting)}.", setting
        if setting and _switch(setting):
            return f"Turn on {_setting_words(setting)}{_setting_note(setting)}.", setting
        if setting:
            return f"Give {_setting_words(setting)} a value{_truthy(setting)}{_setting_note(setting)}.", setting
        return f"Make sure {c.say(node)}.", None

    def _constant_value(self, node: ast.expr, site) -> str:
        """` (128)` for a module constant the guard compares with (`MAX_LOGPROB_TOKEN_IDS`); "" for other values."""
        program = self.settings.program
        found = program.constant(site.path, node.id) if program is not None and isinstance(node, ast.Name) else None
        return f" ({code(found[0])})" if found else ""

    def _divisibility(self, node: ast.expr, site: RaiseSite) -> tuple[str, Setting] | None:
        """`x % size == 0` where the size is a setting: a value of it that divides x (or, for `size % x == 0`, a
        multiple of x); None for other conditions."""
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)
                and isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Mod)
                and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value == 0):
            return None
        left, right = node.left.left, node.left.right
        setting = self.settings.resolve(right, site)
        if setting:
            return f"Use a value of {_setting_words(setting)} that divides {code(c.src(left))}{_setting_note(setting)}.", setting
        setting = self.settings.resolve(left, site)
        if setting:
            return f"Use a value of {_setting_words(setting)} that is a multiple of {code(c.src(right))}{_setting_note(setting)}.", setting
        return None

    def _origin_of(self, node: ast.expr, site: RaiseSite) -> str:
        if isinstance(node, ast.Name):
            for assignment in site.assignments:
                if assignment.name == node.id and "=" in assignment.code:
                    return f" (it is set by {code(assignment.code.split('=', 1)[1].strip())})"
        return ""

    def example_fix(self, node: ast.expr, setting: Setting | None, avoid: frozenset[str] = frozenset()) -> ExampleFix | None:
        """Before/after for a guard that compares a setting with a literal; None when there is no such comparison."""
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and c.is_literal(node.comparators[0])):
            return None
        op, right = type(node.ops[0]), node.comparators[0]
        if op not in (ast.Eq, ast.Is, ast.In):
            return None
        good = right.elts[0] if isinstance(right, (ast.Tuple, ast.List, ast.Set)) and right.elts else right
        bad = self._other_value(setting, c.src(good), avoid)  # a value none of the ways out allows: one that raises
        if setting and setting.flag:
            flag = setting.flag.flags[0]
            before = f"vllm serve MODEL {flag} {shlex.quote(_value(bad)) if bad else 'VALUE'}"
            after = "vllm serve MODEL" if c.is_none(good) else f"vllm serve MODEL {flag} {shlex.quote(_value(good))}"
            return ExampleFix(before=before, after=after, language="shell")
        if setting and setting.env:
            name = setting.env.name
            before = f"{name}={shlex.quote(_value(bad)) if bad else 'VALUE'} vllm serve MODEL"
            after = "vllm serve MODEL" if c.is_none(good) else f"{name}={shlex.quote(_value(good))} vllm serve MODEL"
            return ExampleFix(before=before, after=after, language="shell")
        return None  # an assignment to a variable of vLLM's is nothing a user writes

    def _other_value(self, setting: Setting | None, good: str, avoid: frozenset[str] = frozenset()) -> ast.expr | None:
        if setting and setting.field:
            for choice in setting.field.choices:
                if choice != good and choice not in ("None",) and choice not in avoid:
                    return c.parse(choice)
        return None

    def meaning(self, error: ErrorEntry, site: RaiseSite, kind: str, settings: list[Setting], checked: list | None = None,
                lacking: bool = False, computed: tuple | None = None, machine: list[str] = (), selected: list[Selection] = (),
                checkpoint: bool = False, refused: bool = False, phase: tuple[str, str] = ("", ""), callers_said: bool = False) -> str | None:
        """A short paragraph from what the code tells: who raises it, what the function is for, when it runs and what
        that ends, what kind of error it is."""
        exc = short_name(error.exception) or site.exception.written
        article = "An" if exc[:1] in "AEIOU" else "A"
        where = f"while {code(site.function)} runs, in {subsystem_of(site.path)}" if site.function != "<module>" else f"when {code(site.path)} is imported"
        parts = [f"{article} {code(exc)} raised {where}.", self.exception_doc(error)]
        if site.function_doc:
            first = _first_sentence(site.function_doc)
            parts.append(f"That function's documentation begins: “{doc_md(first)}”")
        when, said = phase  # ("while vLLM loads ...", "It runs while vLLM loads ...")
        if said and kind not in ("abstract", "control"):
            # what its failure ends, unless a call of it may take the error (a fallback): then it may end nothing
            program = self.settings.program
            calls = program.calls_of(site.path, site.function) or []
            names = self._catching(error)
            taken = _takes(program.spared(site.path, site.line), names) or any(_takes((*call.caught, *call.spared), names) for _, call in calls)
            parts.append(said if taken else f"{said} {self.ends_startup(when)}".strip())
        if checked and kind == "internal":
            parts.append(f"Every call of {code(site.function)} in vLLM runs only where this check passes ({_calls_said(checked)}), so no setting "
                         "of yours reaches it through them: seeing it means a bug in vLLM, or your own code calling the function directly.")
        elif kind == "internal" and computed:
            what, calls = computed
            shown = f" (called from {_calls_said(calls)})" if calls else ""
            read = ("the shape, type or layout of the tensors the function is given" if what == "tensors"
                    else f"what the code that prepares a GPU kernel ({code(site.path)}) is given, values vLLM derives from the "
                         "model and the backend it chose")
            parts.append(f"What it checks is {read}{shown}, not a value you set: raised through vLLM's own calls, it means a bug "
                         "in vLLM, or a combination of model, quantization and backend its code did not expect (report it with the "
                         "message, the model and the command line); raised through a plugin's or your own code, what that code passes.")
        elif kind == "internal":
            parts.append("It checks an assumption inside vLLM: seeing it usually means a bug in vLLM rather than a mistake in your setup.")
        elif kind == "abstract":
            cls, _, method = site.function.rpartition(".")
            parts.append(f"{code(cls + '.' + method)} has no implementation here: the code raises this in its place, the way Python "
                         f"marks a method that a class built on {code(cls)} (vLLM's own or a plugin's) is to provide.")
            if self._abstract(site):  # Python refuses to make an object of a class that leaves an abstract method out
                parts.append(f"It is an abstract method: no class without its own {code(method)} can be made at all, so this runs "
                             f"only when an override calls it ({code('super().' + method)}).")
            else:
                parts.append(f"It is reached when the object in use does not override {code(method)}, or when its override calls "
                             f"this one ({code('super().' + method)}).")
        elif kind in ("control", "environment") and site.exception.how == "reraise":
            parts.append(self.wrapped(site))
        elif kind == "control":
            parts.append(f"A {code(exc)} is no failure in itself: Python code raises it to end a loop, a task or a process "
                         "(a stream that is done, a request cancelled, a shutdown). If something failed, the error printed before it says what.")
        elif refused:
            cls = site.function.rpartition(".")[0]
            parts.append(f"{code(cls)} cannot be made at all: its constructor raises this whatever it is given, so what picks "
                         "this class (a platform, a model, a backend or a feature) is not supported in that combination.")
        elif lacking:
            cls, _, method = site.function.rpartition(".")
            parts.append(f"No class vLLM builds on {code(cls.rpartition('.')[2])} provides its own {code(method)}: called on any of "
                         f"them, it raises this, so whatever asked for {code(method)} is not available with those classes.")
        elif kind == "environment" and machine:
            shown = ", ".join(code(name) for name in machine[:3])
            needs = ("a GPU of the compute capability (generation) this code path needs: on another GPU, choose a backend or "
                     "feature that supports it" if any(name.startswith("current_platform.") for name in machine)
                     else "a package, a library or a device that this code path needs")
            parts.append(f"What it checks is what this machine has installed or attached ({shown}), not a setting: {needs}.")
        elif kind == "environment" and _TIMED_OUT.search(error.template or ""):
            parts.append("It reports a wait that ran out: another process (a worker, the engine core, a daemon), a device or "
                         "the network did not answer in time. The logs of the process it waited for, printed before this, "
                         "usually say why: it died, hung or is still loading.")
        elif kind == "environment":
            parts.append("It reports something about the machine vLLM runs on rather than about a setting: a package, a file, "
                         "a device or the network.")
        elif checkpoint:
            parts.append("What it checks is a tensor of the model's checkpoint as vLLM reads it from the files (its name, shape or "
                         "dtype), against what vLLM's implementation of this model expects: the checkpoint's weights are not laid "
                         "out the way this code loads them.")
        elif settings:
            # "the number of items in X" beside X says X twice
            said = [s for s in settings if not any(o is not s and s.label.endswith(_setting_words(o)) for o in settings)]
            named = "; ".join(_setting_words(s) + _documented(s) for s in said[:3])
            parts.append(f"What it checks reads settings you control: {named}.")
        if kind in ("user", "unknown", "environment") and not lacking and not callers_said:
            parts.append(self.called_from(site))
        if site.exception.how != "reraise":
            parts.append(self.wrapped(site))
        if selected and kind != "control":
            parts.append(runs_only_when(selected))
        parts.append(self.platforms_said(error))
        parts.append(self.validated(error, site))
        return " ".join(p for p in parts if p)

    def wrapped(self, site: RaiseSite) -> str:
        """For a raise in an `except` block: what the `try` block runs, whose failure it reports or passes on, and
        where the original exception shows; "" elsewhere."""
        handler = _handler(site)
        if handler is None:
            return ""
        program = self.settings.program
        calls = program.tried(site.path, site.function, handler.line) if program is not None else []
        named = list(dict.fromkeys(_call_text(call) for call in calls if call.name not in _PLAIN_CALLS and call.receiver not in ("logger", "logging")))
        what = ", ".join(code(text) for text in named[:MAX_TRIED]) + (f" and {len(named) - MAX_TRIED} more calls" if len(named) > MAX_TRIED else "")
        caught = f"{code('except ' + one_line(handler.code))} (line {handler.line})" if handler.code else f"the bare {code('except:')} (line {handler.line})"
        if site.exception.how == "reraise":
            return (f"This {code('raise')} passes on, unchanged, the exception that {caught} caught: it is no error of its own, but "
                    "the place that exception went through. The error is that exception, with its own type and message (the last "
                    "line of the traceback)" + (f", raised in what the {code('try')} block runs: {what}." if what else "."))
        if site.cause == "None":
            shown = f"The original exception is not printed ({code('from None')} hides it): this message is all that reports it."
        elif site.cause:
            shown = ("Python prints the original exception first, then “The above exception was the direct cause of the following "
                     "exception:”: its type and message say what failed.")
        else:
            shown = ("Python prints the original exception first, then “During handling of the above exception, another exception "
                     "occurred:”: its type and message say what failed.")
        runs = f" ({what})" if what else ""
        return f"It reports a failure in what the {code('try')} block before it runs{runs}, caught by {caught}. {shown}"

    def platforms_said(self, error: ErrorEntry) -> str:
        """"Within vLLM, this file is loaded only on ROCm (AMD GPUs) ..." where the imports that reach it are all made
        under platform tests (for an error raised in several files, any of them); "" elsewhere."""
        program = self.settings.program
        found = frozenset().union(*(program.platforms(s.path) for s in error.sites)) if program is not None else PLATFORMS
        if found == PLATFORMS:
            return ""
        if len(found) > len(PLATFORMS) / 2:
            said = "on every platform but " + " and ".join(_PLATFORM_NAMES[p] for p in sorted(PLATFORMS - found))
        else:
            said = "only on " + " or ".join(_PLATFORM_NAMES[p] for p in sorted(found))
        one = len({s.path for s in error.sites}) == 1
        files, them = ("this file is", "it") if one else ("the files raising it are", "them")
        return (f"Within vLLM, {files} loaded {said}: every import that reaches {them} is made under a "
                f"{code('current_platform.is_…()')} test.")

    def hierarchy(self, exception: str) -> tuple[str, ...]:
        """catalog.hierarchy of the exception, worked out once per exception class of the release."""
        if exception not in self._bases:
            self._bases[exception] = hierarchy(exception, self.classes)
        return self._bases[exception]

    def exception_doc(self, error: ErrorEntry) -> str:
        """What vLLM's documentation of the exception class says (and of the first class it is built on that has
        some, where that says more): `VLLMValidationError` "... for request validation failures", a
        `VLLMClientError`: "Base class for errors caused by the client request (4xx)."
        """
        said = []
        for name in self.hierarchy(error.exception)[:MAX_BASES_SAID + 1]:
            cls = self.class_table.get(name)
            if cls is not None and cls.doc and cls.path.startswith("vllm/"):
                said.append(f"{'of its base ' if said else ''}{code(cls.name)}: “{doc_md(_first_sentence(cls.doc))}”")
            if len(said) == MAX_BASES_SAID:
                break
        return f"vLLM's documentation of {'; '.join(said)}" if said else ""

    def validated(self, error: ErrorEntry, site: RaiseSite) -> str:
        """How pydantic reports a ValueError or an assert raised in one of a model's validators: inside a
        ValidationError for the model, after "Value error, " ("Assertion failed, "); "" for other raises."""
        program = self.settings.program
        definition = program.definition(site.path, site.function) if program is not None else None
        which = next((d for d in (definition.decorators if definition else ()) if d in _VALIDATORS), "")
        owner = site.function.rpartition(".")[0]
        if not which or not owner:
            return ""
        if site.kind == "assert":
            prefix = "Assertion failed, "
        elif any(n.rpartition(".")[2] == "ValueError" for n in self.hierarchy(error.exception)):
            prefix = "Value error, "
        else:
            return ""  # pydantic lets other exceptions through as they are
        model = code(owner.rpartition(".")[2])
        what = f"a field of a {model}" if which == "field_validator" else f"a {model}"
        return (f"Pydantic runs this check as it validates {what}, and reports it inside a {code('ValidationError')} for {model}, "
                f"after {code(prefix.strip())}.")

    def selected(self, site: RaiseSite) -> list[Selection]:
        """The connectors, models, parsers or backends the raising file's code runs under, when they can be said."""
        program = self.settings.program
        registered = program.selected_for(site.path, site.function) if program is not None else None
        return (selections(registered, self.settings.lever_exists) or []) if registered else []

    def phases(self, site: RaiseSite, caught_by: frozenset[str] = frozenset()) -> list[tuple[str, str, int]]:
        """When vLLM runs the raising function, from the functions that reach it without catching the error (`caught_by`:
        the names an `except` takes it by): (the phase, "It runs while vLLM loads ...", calls between), nearest first."""
        program = self.settings.program
        if program is None or site.function == "<module>":
            return []
        found: dict[str, tuple[str, str, int]] = {}
        for path, function, hops in [(site.path, site.function, 0), *program.upward(site.path, site.function, caught_by=caught_by)]:
            for when in self._phases_of(path, function):
                if when not in found:
                    # a call path, not a claim that this phase runs it first: an earlier phase may reach it before
                    found[when] = (when, f"It runs {when}." if not hops else
                                   f"Calls in vLLM reach it from {code(function)} ({path}), which runs {when}.", hops)
        return list(found.values())[:MAX_PHASES]

    def inherited_phase(self, path: str, function: str, depth: int = MAX_INHERITED) -> tuple[str, list] | None:
        """The one phase every call of a function is made in, a few calls up, with the calls: (phase, calls); None
        where a call is made in none, in another, or outside a function, or the calls are unknown."""
        program = self.settings.program
        calls = program.calls_of(path, function) if program is not None and function != "<module>" else None
        calls = [(p, c) for p, c in calls or () if (p, c.caller) != (path, function)]  # not itself, where it recurses
        if not calls or len(calls) > MAX_CALLERS_PHASED or not all(c.caller for _, c in calls):
            return None
        found = set()
        for call_path, call in calls:
            own = self._phases_of(call_path, call.caller)
            if len(own) == 1:
                found.add(own[0])
            elif own or depth <= 1:
                return None
            else:
                up = self.inherited_phase(call_path, call.caller, depth - 1)
                if up is None:
                    return None
                found.add(up[0])
        return (found.pop(), calls) if len(found) == 1 else None

    def _phases_of(self, path: str, function: str) -> list[str]:
        """The phases a function is, by its name, or by the class its method belongs to (ROLES)."""
        owner, _, method = function.rpartition(".")
        named = [when for pattern, when in PHASES if pattern.search(function)
                 # a `__post_init__` checks the engine's configuration in the classes that declare its settings only (not
                 # `FusedMoEConfig`, which a layer makes as the model is built)
                 and not (when == _CONFIGURING and method == "__post_init__" and owner.rpartition(".")[2] not in self.settings.configs)]
        cls = owner.rpartition(".")[2]
        if _LOADING in named and owner and self.settings.program.derives(cls, {"BaseModelLoader"}):
            named[named.index(_LOADING)] = _LOADING_ONCE
        named += [when for bases, methods, when, model_code in ROLES if method in methods and owner and when not in named
                  and (not model_code or _MODEL_CODE.match(path)) and self.settings.program.derives(cls, set(bases))]
        return named

    @staticmethod
    def ends_startup(when: str) -> str:
        """What a user sees when an error ends a phase of startup: "" for the phases of a running server."""
        if when in _STARTUP_ENDS:
            return _STARTUP_ENDS[when]
        if when in _SERVING:
            return " ".join(p for p in (ENGINE_FAILED if "at startup" in when else "", ENGINE_DIED))
        return ENGINE_FAILED if "at startup" in when or when.startswith("while a worker process starts") else ""

    def _lacking_everywhere(self, error: ErrorEntry, site: RaiseSite, holding: list) -> bool:
        """Whether the raise is a method stub that vLLM builds classes on and none of them provides: then the stub is
        what every one of them does (a feature they lack), not a method left to them."""
        program = self.settings.program
        if not _stub(error, site, holding):
            return False
        owner, _, method = site.function.rpartition(".")
        counted = program.overriding(owner.rpartition(".")[2], method) if program is not None and owner else None
        return bool(counted and counted[0] and not counted[1] and not self._abstract(site))

    def refused(self, error: ErrorEntry, site: RaiseSite, holding: list) -> bool:
        """A constructor that raises NotImplementedError whatever it is given, of a class no class is built on: the
        class refuses to be made (`DeepSeekV4MTP` on CPU), not an interface whose subclasses bring their own."""
        program = self.settings.program
        if program is None or not site.function.endswith(".__init__") or not _stub(error, site, holding):
            return False
        return program.overriding(site.function.rpartition(".")[0].rpartition(".")[2], "__init__")[0] == 0

    def _abstract(self, site: RaiseSite) -> bool:
        program = self.settings.program
        definition = program.definition(site.path, site.function) if program is not None else None
        # @abstractmethod binds only in a class whose metaclass is ABCMeta: one built on ABC; and a static or class
        # method is called on a class, which need not be made at all
        return bool(definition and definition.abstract and not {"staticmethod", "classmethod"} & set(definition.decorators)
                    and program.derives(site.function.rpartition(".")[0].rpartition(".")[2], {"ABC"}))

    def reads_checkpoint(self, site: RaiseSite, holding: list) -> bool:
        """Whether a condition of the raise reads a tensor of the checkpoint that a weight-loading function is handed,
        or what comes from one: `loaded_weight.shape`, `name` of `for name, tensor in weights`, a slice of it."""
        program = self.settings.program
        definition = program.definition(site.path, site.function) if program is not None else None
        if definition is None or not _WEIGHT_LOADING.search(site.function):
            return False
        from_files = set(_CHECKPOINT_TENSORS & set(definition.params))
        if not from_files:
            return False
        steps = [(f"for {cond.code}: pass", None) for cond in site.guard if cond.kind == "for"]
        steps += [(a.code.strip(), a.name) for a in site.assignments]
        for _ in range(MAX_CHECKPOINT_STEPS):  # a local of a loop target of a slice of it ...
            before = len(from_files)
            for text, name in steps:
                stmt = parse_statement(text)
                if isinstance(stmt, ast.For) and _names(stmt.iter) & from_files:
                    from_files |= _names(stmt.target)
                elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None and _names(stmt.value) & from_files:
                    from_files.add(name)
            if len(from_files) == before:
                break
        return any(_names(node) & from_files for cond, node in holding if cond.kind in _DECIDING)

    def computed_inside(self, site: RaiseSite, holding: list) -> tuple[str, list] | None:
        """Whether what the raise's conditions read is something vLLM computes itself: the layout of tensors its code
        builds ("tensors") or the parameters of a GPU kernel ("kernel"), in a function vLLM's code calls; with those
        calls. None when a condition may read what a caller was handed from outside, or nothing in vLLM calls it (or
        imports its file: kernels only tools outside the package run)."""
        program = self.settings.program
        nodes = [node for _, node in holding]
        if program is None or not nodes or site.function == "<module>":
            return None
        if _INPUT_CODE.search(site.path) or _INPUT_CODE.search(site.function):
            return None
        subs = [sub for node in nodes for sub in ast.walk(node)]
        chains = [c.attribute_chain(sub) for sub in subs if isinstance(sub, ast.Attribute)]
        if any(chain and chain[0] in _HANDED_IN for chain in chains):
            return None
        if any(isinstance(sub, ast.Constant) and isinstance(sub.value, str) for sub in subs):
            return None  # a choice by name (`backend not in ("triton", "fused")`): names come from settings
        if any(isinstance(sub, ast.Attribute) and sub.attr == "is_cuda" for sub in subs):
            return None  # where a tensor lives: what the machine has attached
        calls = program.calls_of(site.path, site.function) or []
        definition = program.definition(site.path, site.function)
        given = set(definition.params) - {"self", "cls", "*"} if definition else set()
        reads_given = any(isinstance(sub, ast.Name) and sub.id in given for sub in subs)
        if _KERNEL_CODE.search(site.path) and reads_given and program.imported(site.path):
            # what a kernel's wrapper is given (not the state of some object): only vLLM's layers launch its kernels,
            # through calls a name does not always reveal
            return "kernel", calls
        if calls and any(chain and chain[-1] in _TENSOR_LAYOUT and len(chain) > 1 for chain in chains):
            return "tensors", calls  # with no call in vLLM, it is an API a plugin or a trainer calls, or dead code
        return None

    def called_from(self, site: RaiseSite) -> str:
        """Where vLLM calls the raising function, the first few calls by place: which part of vLLM reaches it. "" when
        nothing in vLLM calls it, or the calls are unknown."""
        program = self.settings.program
        calls = program.calls_of(site.path, site.function) if program is not None and site.function != "<module>" else None
        # one per place: a line may call it twice; not itself, where it recurses
        callers = list({(path, call.caller, call.line): (path, call) for path, call in calls or ()
                        if call.caller and (path, call.caller) != (site.path, site.function)}.values())
        return f"vLLM calls {code(site.function.rpartition('.')[2])} from {_calls_said(callers)}." if callers else ""

    def gated(self, site: RaiseSite) -> Gate | None:
        """A setting every call of the raising function in vLLM is made under (`if parallel_config.enable_eplb:
        self.rearrange()`); None when the calls share none, or are unknown. Only conditions that read a setting count,
        the same setting held the same way in each call."""
        program = self.settings.program
        if program is None or site.function == "<module>" or site.function.endswith(".__init__"):
            return None  # an object is also made by factories no name links (`cls(...)`, `from_pretrained`)
        calls = program.calls_of(site.path, site.function)
        if not calls or len(calls) > MAX_GATED_CALLS:
            return None
        common: dict[tuple, tuple[ast.expr, Place]] | None = None
        for path, call in calls:
            found = {}
            for text in (t for t in call.known if t not in call.enforced):  # an assert's test is no way around: it raises
                node = parse_text(text)
                key = self._gate_key(node, Place(path, call.caller)) if node is not None else None
                if key is not None:
                    found.setdefault(key, (node, Place(path, call.caller)))
            common = found if common is None else {k: v for k, v in common.items() if k in found}
            if not common:
                return None
        for node, place in reversed(common.values()):  # the innermost first: an `elif`'s own test says more than the `if`s before
            way, setting = self.action(c.negate(node), place)
            if setting is None or not way or "config.json" in setting.label or setting.field and setting.field.name.startswith("_"):
                continue  # the model's own design, or a field vLLM keeps to itself: no way around
            shown = _calls_said([(path, call) for path, call in calls])
            function, condition = code(site.function.rpartition(".")[2]), code(ast.unparse(node))
            return Gate(f"Every call of {function} in vLLM is made only where {condition} holds, which {_setting_words(setting)} decides "
                        f"({shown}).", way, f"vLLM calls {function} only where {condition} holds.", setting.name)
        return None

    def _gate_key(self, node: ast.expr, place: Place) -> tuple | None:
        """A condition around a call, keyed by the setting it reads and how: ("on", name), ("off", name), or the
        comparison; None for a condition that reads no setting."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.settings.resolve(node.operand, place)
            return ("off", inner.name) if inner else None
        if (isinstance(node, ast.Compare) and len(node.ops) == 1 and c.is_literal(node.comparators[0])
                and isinstance(node.ops[0], (ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn))):  # a choice, not a bound
            left = self.settings.resolve(node.left, place)
            return ("compare", left.name, type(node.ops[0]).__name__, c.src(node.comparators[0])) if left else None
        if isinstance(node, (ast.Name, ast.Attribute)):
            setting = self.settings.resolve(node, place)
            return ("on", setting.name) if setting else None
        return None

    def checked_by_callers(self, site: RaiseSite, holding: list) -> list | None:
        """The calls of the raising function, where each runs only when one condition of the raise is false (its
        caller checked it first, or asserted it); None otherwise."""
        program = self.settings.program
        if program is None or site.function == "<module>":
            return None
        for _, node in holding:
            calls = program.checked_first(site.path, site.function, node)
            if calls:
                return calls
        # or each call passes literals the check accepts (`activation="silu"`): not for a parameter the function sets again
        reassigned = {a.name for a in site.assignments}
        return program.passed_accepted(site.path, site.function, [node for _, node in holding if not _names(node) & reassigned])

    def caught_by_callers(self, error: ErrorEntry, site: RaiseSite) -> tuple[str, tuple[str, ...]]:
        """Where every call of the raising function in vLLM sits in a `try` whose handler catches the error and does
        not raise again: said, with the handlers and what they log, and the logged messages' templates; ("", ())
        otherwise (or when the calls are unknown)."""
        program = self.settings.program
        if program is None or not error.exception or site.function == "<module>":
            return "", ()
        found = program.all_catch(site.path, site.function, self._catching(error))
        if not found:
            return "", ()
        logs = {(path, line): program.logged(path, line) for path, _, (_, line) in found}
        shown = "; ".join(f"{code(call.caller or '<module>')} catches {code(name) if name != '*' else 'everything'} ({path}:{line})"
                          for path, call, (name, line) in found[:MAX_VIA])
        more = f"; {len(found) - MAX_VIA} more calls catch it too" if len(found) > MAX_VIA else ""
        said = "it is handled there, and what you see is what that handler logs or returns, unless your own code calls the function."
        logged = list(dict.fromkeys(log for log in logs.values() if log))
        if logged and all(logs.values()):  # every handler logs: those lines are what shows
            lines = " or ".join(f"{level.upper()} {code(template)}" for level, template in logged[:MAX_VIA])
            said = f"it is handled there, and vLLM logs {lines} in its place, unless your own code calls the function."
        sentence = f"Where vLLM calls {code(site.function)}, it catches this error ({shown}{more}): {said}"
        return sentence, tuple(template for _, template in logged)

    def _catching(self, error: ErrorEntry) -> set[str]:
        """The names an `except` clause catches this error by: its class, the classes it is built on, and `Exception` (or
        `BaseException` for SystemExit and its like)."""
        names = {n.rpartition(".")[2] for n in (error.exception, *self.hierarchy(error.exception))} | {"BaseException"}
        return names | ({"Exception"} if short_name(error.exception) not in _NOT_EXCEPTIONS else set())

    def caught_in_place(self, error: ErrorEntry, site: RaiseSite) -> tuple[str, tuple[str, ...]]:
        """For a raise inside a `try` block of its own function whose handler takes it: what the user sees instead (what
        the handler logs, or the error it raises in its place), and the logged templates; ("", ()) elsewhere."""
        program = self.settings.program
        found = program.in_try(site.path, site.line) if program is not None and error.exception else None
        if found is None or site.exception.how == "reraise":
            return "", ()
        handled = self._handled(site.path, *found, self._catching(error))
        if handled is None:
            return "", ()
        line, wrapper = handled
        if wrapper is None:  # the handler keeps it
            logged = program.logged(site.path, line)
            instead = (f"vLLM logs {logged[0].upper()} {code(logged[1])} in its place" if logged else
                       "what you see is what that handler logs or returns, if anything")
            return (f"The `try` block around this raise catches it (the handler at line {line}): the error does not leave "
                    f"{code(site.function)}, and {instead}.", (logged[1],) if logged else ())
        if wrapper[0].id == error.id:
            return "", ()
        shown = "`from None` hides this one" if wrapper[1].cause == "None" else "this one is printed above it, in the same traceback"
        return (f"The `try` block around this raise catches it and raises {code(one_line(title_of(wrapper[0])))} in its place "
                f"({wrapper[1].path}:{wrapper[1].line}): that is what the log ends with, and {shown}."), ()

    def wrapped_by_callers(self, error: ErrorEntry, site: RaiseSite) -> str:
        """Where every call of the raising function in vLLM sits in a `try` whose handler catches the error and raises
        another error with a message of its own: that error said, as what the log ends with; "" otherwise."""
        program = self.settings.program
        if program is None or not error.exception or site.function == "<module>":
            return ""
        calls = program.calls_of(site.path, site.function)
        names = self._catching(error)
        found = []
        for path, call in calls or ():
            handled = self._handled(path, call.tried, call.caught, names)
            if handled is None or handled[1] is None or handled[1][0].id == error.id:
                return ""
            found.append(handled[1])
        if not found:
            return ""
        titles = list(dict.fromkeys(code(one_line(title_of(other))) for other, _ in found))
        hidden = all(at.cause == "None" for _, at in found)
        where = ", ".join(list(dict.fromkeys(f"{at.path}:{at.line}" for _, at in found))[:MAX_VIA])
        shown = "`from None` hides this one" if hidden else "this one is printed above it, in the same traceback"
        return (f"Where vLLM calls {code(site.function)}, it catches this error and raises {' or '.join(titles[:MAX_VIA])} in its "
                f"place ({where}): that is what the log ends with, and {shown}.")

    def _handled(self, path: str, tried: tuple[int, ...], caught: tuple[tuple[str, int], ...], names: set[str]
                 ) -> tuple[int, tuple[ErrorEntry, RaiseSite] | None] | None:
        """What becomes of an exception of `names` raised in `try` blocks whose handlers are at lines `tried` (innermost
        first; `caught`: those that keep what they catch), for a call or a raise: the first handler of each `try` that
        takes it, from the innermost out, a bare `raise` passing it on outward. (its line, None) where a handler keeps it;
        (its line, the error with a message it raises in its place); None where none takes it, or the handler raises
        what has no message."""
        kept = {line for name, line in caught if name in names or name == "*"}
        for line in tried:
            if line in kept:
                return line, None
            raised = self.raised_in_handler.get((path, line), ())
            if not raised or _caught_types(raised[0][2]) and not names & set(_caught_types(raised[0][2])):
                continue  # a handler of other exceptions
            if all(at.exception.how == "reraise" for _, at, _ in raised):
                continue
            wrapper = next(((other, at) for other, at, _ in raised if other.template), None)
            return (line, wrapper) if wrapper else None
        return None


def derived_annotator(catalog: Catalog) -> Callable[[ErrorEntry], Annotation]:
    return Deriver(catalog)
