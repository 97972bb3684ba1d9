"""The program model of one release: the facts of its files (extractor/facts.py) linked by name.

It answers one question for the annotator: which calls reach a function, and what they pass for one of its
parameters. Calls are linked by name only where the name is unambiguous in the release: a function or
method defined once (`self.f(x)`, `obj.f(x)`, `f(x)`), or a class defined once (`Config(x)` reaches
`Config.__init__`). A call the linking cannot be sure of is left out, and the annotator then says nothing
rather than something false.
"""

from __future__ import annotations

import ast
import copy
import itertools
import math
import operator
from dataclasses import dataclass
from typing import Callable

from .conditions import conjuncts, negate
from .facts import PLATFORMS, Call, Definition, FileFacts, Registration, module_name

# What a request to vLLM is made of: the OpenAI-compatible API's models, and the parameters of LLM.generate/encode.
REQUEST_BASES = ("OpenAIBaseModel",)
REQUEST_CLASSES = ("SamplingParams", "PoolingParams", "BeamSearchParams")
MAX_BASES = 6  # steps up a class's bases
MAX_UPWARD = 400  # functions visited going up the calls from one
MAX_CALLERS = 12  # calls followed for one parameter: more, and the value is anybody's
MAX_IMPORTERS = 400  # files visited going up the imports from one: more, and it is everybody's
MAX_DESCENDANTS = 400  # classes visited going down from one to those built on it
CLI_DIR = "vllm/entrypoints/cli/"  # where the `vllm` command's subcommands are defined, one class per command
MAX_COMMAND_HOPS = 4  # imports followed up from a file to the commands that load it
MAX_COMBOS = 16  # choices of literals a condition is worked out for
MAX_LITERAL_HOPS = 2  # calls followed up from a parameter to the literals its callers pass


@dataclass(frozen=True)
class CallSite:
    path: str
    call: Call
    argument: str  # the text passed for the parameter asked about


class Program:
    """Built from the release's facts, or from a function that reads them when the program is first asked."""

    def __init__(self, facts: dict[str, FileFacts] | Callable[[], dict[str, FileFacts]]) -> None:
        self._facts = facts
        self._linked = False

    def _link(self) -> None:
        if self._linked:
            return
        facts = self._facts() if callable(self._facts) else self._facts
        self.definitions: dict[tuple[str, str], Definition] = {}
        by_name: dict[str, list[tuple[str, Definition]]] = {}
        for path, f in facts.items():
            for d in f.definitions:
                self.definitions[(path, d.qualname)] = d
                by_name.setdefault(d.qualname.rpartition(".")[2], []).append((path, d))
        self._by_name = by_name
        self.calls: dict[str, list[tuple[str, Call]]] = {}
        self._made: dict[tuple[str, str], list[Call]] = {}  # (path, function) -> the calls it makes
        for path, f in facts.items():
            for call in f.calls:
                self.calls.setdefault(call.name, []).append((path, call))
                self._made.setdefault((path, call.caller), []).append(call)
        self.bindings: dict[tuple[str, str, str], str] = {(path, b.function, b.name): b.value for path, f in facts.items() for b in f.bindings}
        self._logged = {(path, line): (level, template) for path, f in facts.items() for line, level, template in f.logged}
        self._raises = {(path, line): (tried, caught, spared) for path, f in facts.items() for line, tried, caught, spared in f.raises}
        self._children: dict[str, list[tuple[str, str]]] = {}  # a base's last name -> the classes that name it
        for (path, qualname), d in self.definitions.items():
            for base in d.bases:
                self._children.setdefault(base, []).append((path, qualname))
        self._link_imports(facts)
        self._linked = True

    def _link_imports(self, facts: dict[str, FileFacts]) -> None:
        """Who imports each file, and the files vLLM imports only when a user selects them by a registered name.
        Importing `a.b.c` runs `a` and `a.b` too: the packages on the way are imported as well."""
        modules = {module_name(path): path for path in facts}
        self._files = set(facts)
        self._modules = modules
        self._imports_of = {path: f.imports for path, f in facts.items()}

        def found(dotted: str) -> list[str]:
            parts = dotted.split(".")
            return [modules[m] for m in (".".join(parts[:n]) for n in range(len(parts), 0, -1)) if m in modules]

        self._constants = {(path, name): (value, line) for path, f in facts.items() for name, value, line in f.constants}
        self._imported: dict[tuple[str, str], str] = {}  # (file, constant it imports) -> the file that defines it
        self._importers: dict[str, set[str]] = {}
        self._edges: dict[tuple[str, str], frozenset[str]] = {}  # (importer, imported) -> the platforms it is imported on
        self.homes: dict[str, list[Registration]] = {}  # a file vLLM imports for a registered name -> those names
        for path, f in facts.items():
            only = {dotted: frozenset(platforms.split(",")) for dotted, platforms in f.platform_imports}
            for dotted in f.imports:
                module, _, name = dotted.rpartition(".")
                if name and (modules.get(module), name) in self._constants:
                    self._imported[(path, name)] = modules[module]
                for target in found(dotted):
                    if target != path:
                        self._importers.setdefault(target, set()).add(path)
                        self._edges[(path, target)] = self._edges.get((path, target), frozenset()) | only.get(dotted, PLATFORMS)
            for r in f.registrations:
                if r.module in modules:  # a registry's entry that names no module of the release is none
                    self.homes.setdefault(modules[r.module], []).append(r)
        self._selected: dict[str, list[Registration] | None] = {}
        self._platforms: dict[str, frozenset[str]] = {}
        named: dict[str, list[str]] = {}  # a file of CLI_DIR -> what its command classes are called (`name = "serve"`)
        for (path, name), (value, _) in self._constants.items():
            if path.startswith(CLI_DIR) and name.endswith(".name"):
                named.setdefault(path, []).append(ast.literal_eval(value))
        self._named = {path: names[0] for path, names in named.items() if len(names) == 1}

    def constant(self, path: str, name: str) -> tuple[str, str, int] | None:
        """The literal a module-level constant the file defines or imports was given: (its source, the file, the
        line); None for any other name."""
        self._link()
        where = path if (path, name) in self._constants else self._imported.get((path, name))
        if where is None:
            return None
        value, line = self._constants[(where, name)]
        return value, where, line

    def platforms(self, path: str) -> frozenset[str]:
        """The platforms on which vLLM imports the file at all: through every chain of imports that reaches it, those
        its imports under platform tests allow (`if current_platform.is_rocm(): from .amd import model`). PLATFORMS for
        a file imported unconditionally somewhere, or loaded from outside (a command, a registry's name)."""
        self._link()
        if not self._platforms:
            self._platforms = self._platforms_reached()
        # reached by no chain from outside: a cycle of files loaded by some name the facts do not see, anywhere
        return self._platforms.get(path) or PLATFORMS

    def _platforms_reached(self) -> dict[str, frozenset[str]]:
        """platforms() of every file, at once: from the files loaded from outside (on every platform), along the
        imports, each file getting what its importers have on the platforms each import allows, until nothing grows.
        A cycle of imports adds nothing that does not reach it from outside."""
        files = self._files

        def outside(path: str) -> bool:  # loaded from outside: nothing imports it but its own package's modules
            folder = path.rpartition("/")[0] + "/" if path.endswith("/__init__.py") else None
            return path in self.homes or all(folder and by.startswith(folder) for by in self._importers.get(path, ()))

        reached = {path: PLATFORMS if outside(path) else frozenset() for path in files}
        imports: dict[str, list[str]] = {}
        for by, target in self._edges:
            imports.setdefault(by, []).append(target)
        todo = [path for path, found in reached.items() if found]
        while todo:
            by = todo.pop()
            for target in imports.get(by, ()):
                grown = reached.get(target, frozenset()) | (self._edges[(by, target)] & reached[by])
                if grown != reached.get(target):
                    reached[target] = grown
                    todo.append(target)
        return reached

    def commands(self, path: str) -> list[str]:
        """The `vllm` subcommands that load the file, through a few imports: ["vllm bench serve"]. A subcommand is a
        class of CLI_DIR with a `name`, under the command its folder's main.py names (`bench`), if any."""
        self._link()
        todo, seen, found = [(path, 0)], {path}, set()
        while todo:
            at, hops = todo.pop(0)
            if at in self._named:
                main = at.rpartition("/")[0] + "/main.py"
                parent = self._named.get(main) if main != at else None
                found.add(" ".join(["vllm", *([parent] if parent else []), self._named[at]]))
                continue
            if hops < MAX_COMMAND_HOPS:
                for by in sorted(self._importers.get(at, set()) - seen):
                    seen.add(by)
                    todo.append((by, hops + 1))
        return sorted(found)

    def selected_by(self, path: str) -> list[Registration] | None:
        """The registered names under which vLLM runs the file's code at all: every chain of imports that reaches
        it starts at a module vLLM imports for one of them (a connector, a model architecture, a backend). None
        when some chain starts elsewhere (vLLM's own modules, a command), or the chains are too many to follow."""
        self._link()
        if path not in self._selected:
            todo, seen, names, elsewhere = [path], {path}, [], False
            while todo and not elsewhere:
                at = todo.pop()
                names += self.homes.get(at, [])
                importers = self._importers.get(at, set())
                # imported by nothing vLLM knows: loaded from outside, as commands and plugins are
                elsewhere = not importers and at not in self.homes or len(seen) > MAX_IMPORTERS
                for by in sorted(importers - seen):
                    seen.add(by)
                    todo.append(by)
            self._selected[path] = list(dict.fromkeys(names)) if not elsewhere and names else None
        return self._selected[path]

    def selected_for(self, path: str, function: str) -> list[Registration] | None:
        """selected_by, narrowed for a method of a class a registration names (or of a class such a class is built
        on) to those registrations, unless something else in the release makes an object of that class: a model's
        own methods run only for its architectures, though other models import its file for a part of it."""
        found = self.selected_by(path)
        owner = function.split(".")[0] if "." in function else ""
        if not found or not owner or (path, owner) not in self.definitions or self.definitions[(path, owner)].params:
            return found
        own = [r for r in found if r.cls == owner or r.cls and self.derives(r.cls, {owner})]
        made = [call for _, call in self.calls.get(owner, []) if not call.method or call.receiver]
        return own if own and not made else found

    def definition(self, path: str, function: str) -> Definition | None:
        self._link()
        return self.definitions.get((path, function))

    def imported(self, path: str) -> bool:
        """Whether another file of the release imports the file (or vLLM loads it by a registered name): whether vLLM's
        own code can run it at all, rather than only tools and tests outside the package."""
        self._link()
        return bool(self._importers.get(path)) or path in self.homes

    def spared(self, path: str, line: int) -> tuple[tuple[str, int], ...]:
        """The handlers around the raise at `line`, in its function, that may take what it raises and go on (they raise
        again only under a test), as Call.spared has them."""
        self._link()
        return self._raises.get((path, line), ((), (), ()))[2]

    def in_try(self, path: str, line: int) -> tuple[tuple[int, ...], tuple[tuple[str, int], ...]] | None:
        """For a raise at that line inside `try` blocks: the handlers' lines, innermost first, and those that catch without
        raising again (as Call.tried and Call.caught); None for a raise in no `try` block."""
        self._link()
        found = self._raises.get((path, line))
        return found[:2] if found else None

    def logged(self, path: str, line: int) -> tuple[str, str] | None:
        """What the handler at that line logs: (level, message template); None when it logs nothing vLLM spells out."""
        self._link()
        return self._logged.get((path, line))

    def binding(self, path: str, function: str, name: str) -> str | None:
        self._link()
        return self.bindings.get((path, function, name))

    def returns(self, name: str) -> str:
        """The class the function or method of that name is annotated to return, where the name is defined once
        in the release (or every definition of it says the same class); "" otherwise."""
        self._link()
        found = {d.returns for _, d in self._by_name.get(name, [])}
        return found.pop() if len(found) == 1 else ""

    def parameter_class(self, path: str, function: str, name: str) -> str:
        """The class a parameter of the function is annotated with (`request: ChatCompletionRequest`), or ""."""
        self._link()
        d = self.definitions.get((path, function))
        if d is None or name not in d.params or len(d.annotations) != len(d.params):
            return ""
        return d.annotations[d.params.index(name)]

    def request_field(self, cls: str, field: str) -> str:
        """The request model that declares `field`, where `cls` is one (a class built on one of REQUEST_BASES, or
        one of REQUEST_CLASSES) defined once in the release; "" otherwise."""
        self._link()
        seen = 0
        while cls and seen < MAX_BASES:
            found = self._classes(cls)
            if len(found) != 1:
                return ""
            d = found[0]
            if field in d.fields and self._is_request(cls):
                return cls
            cls = next((b for b in d.bases if b not in ("object", "Generic")), "")
            seen += 1
        return ""

    def request_model_with(self, field: str) -> str:
        """A request model (or one of REQUEST_CLASSES) that declares `field`, the first by name; "" when none does."""
        self._link()
        if not hasattr(self, "_request_fields"):
            self._request_fields: dict[str, str] = {}
            for name in sorted(self._by_name):
                found = self._classes(name)
                if len(found) == 1 and found[0].fields and self._is_request(name):
                    for declared in found[0].fields:
                        self._request_fields.setdefault(declared, name)
        return self._request_fields.get(field, "")

    def constructions(self, cls: str, field: str) -> list[CallSite] | None:
        """What each call that makes a `cls` (a class defined once that annotates `field`, as a dataclass does) passes
        for `field` by keyword; None when a call passes it otherwise or not at all, the class makes itself
        (`cls(...)` in its own methods), or no call makes one."""
        self._link()
        found = self._classes(cls)
        if len(found) != 1 or field not in found[0].fields:
            return None
        calls = [(path, call) for path, call in self.calls.get(cls, []) if not call.method or call.receiver]
        if not calls or len(calls) > MAX_CALLERS or any(call.caller.startswith(cls + ".") for _, call in self.calls.get("cls", [])):
            return None
        sites = []
        for path, call in calls:
            passed = dict(call.keywords)
            if not passed.get(field):
                return None  # positionally, through **kwargs, or an expression no setting is read from
            sites.append(CallSite(path, call, passed[field]))
        return sites

    def classes(self, name: str) -> list[Definition]:
        """The classes of that name in the release."""
        self._link()
        return self._classes(name)

    def _classes(self, name: str) -> list[Definition]:
        """The classes of that name in the release (those with bases or annotated fields: a definition without
        parameters and without either could be a function)."""
        return [d for _, d in self._by_name.get(name, []) if not d.params and (d.bases or d.fields)]

    def _is_request(self, cls: str) -> bool:
        return self.derives(cls, {*REQUEST_CLASSES, *REQUEST_BASES})

    def overriding(self, cls: str, method: str) -> tuple[int, int]:
        """How many classes of the release are built on `cls` (through their bases, by name: on any class of that
        name, which can only add classes that define `method`), and how many of them define `method` themselves."""
        self._link()
        todo, seen, overriding = [cls], set(), 0
        while todo and len(seen) < MAX_UPWARD:
            for path, qualname in self._children.get(todo.pop(), []):
                if (path, qualname) in seen:
                    continue
                seen.add((path, qualname))
                if (path, f"{qualname}.{method}") in self.definitions:
                    overriding += 1
                else:
                    todo.append(qualname.rpartition(".")[2])
        return len(seen), overriding

    def derives(self, cls: str, names: set[str]) -> bool:
        """Whether the class, defined once in the release, is one of `names` or built on one, through its bases."""
        self._link()
        todo, seen = [cls], set()
        while todo and len(seen) < MAX_BASES * 4:
            cls = todo.pop()
            if cls in names:
                return True
            if cls in seen:
                continue
            seen.add(cls)
            found = self._classes(cls)
            if len(found) == 1:
                todo += found[0].bases
        return False

    def calls_of(self, path: str, function: str) -> list[tuple[str, Call]] | None:
        """Every call of the function in the release; None when a call could reach another function of its name."""
        self._link()
        definition = self.definitions.get((path, function))
        if definition is None:
            return None
        owner, _, name = function.rpartition(".")
        method = self._is_method(path, function)
        if name == "__init__" and method:
            target = owner.rpartition(".")[2]  # `Config(...)` calls Config.__init__
        elif name.startswith("__"):
            return None
        else:
            target = name
        # `x.f()` is not the module function f (it is some object's method)
        calls = [(p, call) for p, call in self.calls.get(target, []) if not (target == name and not method and call.method)]
        if len(self._by_name.get(target, [])) == 1:
            return calls
        # Two functions or classes of that name: each call is linked by what the name is bound to where it is made.
        called = (path, owner if target != name else function)
        found = []
        for p, call in calls:
            where = self._bound(p, call, target)
            if where is None:
                return None  # a call that could be either
            if where == called:
                found.append((p, call))
        return found

    def _bound(self, path: str, call: Call, name: str, hops: int = 3) -> tuple[str, str] | None:
        """The definition a call of `name` reaches by what the name is bound to in the calling file: a function
        nested in the caller, one defined at the top of the file, or one it imports (through a package that imports
        it in turn, a few steps); for `self.f()`, the caller's own class's method where no class built on it has its
        own. None when that cannot be told."""
        if call.method:
            if call.receiver not in ("self", "cls"):
                return None
            parts = call.caller.split(".")
            for n in range(len(parts) - 1, 0, -1):  # the innermost class around the caller
                cls = ".".join(parts[:n])
                d = self.definitions.get((path, cls))
                if d is not None and not d.params:
                    method = (path, f"{cls}.{name}")
                    if method in self.definitions and not any((p, f"{c}.{name}") in self.definitions for p, c in self._descendants(cls)):
                        return method
                    return None
            return None
        parts = call.caller.split(".") if call.caller else []
        for n in range(len(parts), -1, -1):  # nested in the caller, or in what holds it, or at the top of the file
            qualname = ".".join([*parts[:n], name])
            if (path, qualname) in self.definitions:
                return path, qualname
        return self._imported_definition(path, name, hops)

    def _descendants(self, cls: str) -> list[tuple[str, str]]:
        """The classes built on a class (by its last name), and on those, a few levels down."""
        found, todo = [], [cls.rpartition(".")[2]]
        while todo and len(found) < MAX_DESCENDANTS:
            for child in self._children.get(todo.pop(), []):
                if child not in found:
                    found.append(child)
                    todo.append(child[1].rpartition(".")[2])
        return found

    def _imported_definition(self, path: str, name: str, hops: int) -> tuple[str, str] | None:
        for dotted in self._imports_of.get(path, ()):
            module, _, last = dotted.rpartition(".")
            if last != name or module not in self._modules:
                continue
            home = self._modules[module]
            if (home, name) in self.definitions:
                return home, name
            if hops:
                return self._imported_definition(home, name, hops - 1)  # a package passing on what it imports
        return None

    def _is_method(self, path: str, function: str) -> bool:
        owner = function.rpartition(".")[0]
        return bool(owner) and (path, owner) in self.definitions and not self.definitions[(path, owner)].params

    def _call_params(self, path: str, function: str) -> list[str]:
        """The parameters a call passes values for: a method's without `self`."""
        definition = self.definitions[(path, function)]
        return list(definition.params[1:] if self._is_method(path, function) else definition.params)

    def callers(self, path: str, function: str, parameter: str) -> list[CallSite] | None:
        """What each call of the function passes for `parameter`; None when a call cannot be linked or read
        (a starred argument, a name defined twice), or there are too many to be one setting."""
        calls = self.calls_of(path, function)
        definition = self.definitions.get((path, function))
        if calls is None or definition is None or parameter not in definition.params:
            return None
        params = self._call_params(path, function)
        sites = []
        for call_path, call in calls:
            argument = _argument(call, params, parameter)
            if argument is None:
                return None
            sites.append(CallSite(call_path, call, argument))
        return sites if 0 < len(sites) <= MAX_CALLERS else None

    def upward(self, path: str, function: str, limit: int = MAX_UPWARD, caught_by: frozenset[str] = frozenset()
               ) -> list[tuple[str, str, int]]:
        """The functions that reach this one through calls that are surely to it, nearest first: (path, qualified
        name, calls between). A call inside a `try` whose handler catches one of `caught_by` (or everything) is no way
        up: the error stops there (`get_from_keys_or` calling `get_from_keys` in an `except ValueError`)."""
        self._link()
        seen = {(path, function)}
        todo, found = [(path, function, 0)], []
        while todo and len(seen) < limit:
            at_path, at, hops = todo.pop(0)
            for call_path, call in self.calls_of(at_path, at) or ():
                node = (call_path, call.caller)
                if caught_by and any(h[0] in caught_by or h[0] == "*" for h in call.caught):
                    continue
                if call.caller and node not in seen and surely_ours(call):
                    seen.add(node)
                    found.append((call_path, call.caller, hops + 1))
                    todo.append((call_path, call.caller, hops + 1))
        return found

    def checked_first(self, path: str, function: str, condition: ast.expr) -> list[tuple[str, Call]] | None:
        """Each call of the function, where every one of them runs only when `condition` (in the function's own
        names) is false: the caller checked it first. None when a call does not, or the calls are unknown."""
        calls = self.calls_of(path, function)
        definition = self.definitions.get((path, function))
        if not calls or definition is None:
            return None
        method = self._is_method(path, function)
        params = self._call_params(path, function)
        owner = function.rpartition(".")[0]
        for _, call in calls:
            passed = {p: _argument(call, params, p) for p in params}
            same_object = method and call.caller.rpartition(".")[0] == owner  # `self.f()` from the class's own method
            ruled_out = _in_caller(condition, passed, same_object)
            if ruled_out is None or not all(ast.unparse(part) in call.known for part in conjuncts(negate(ruled_out))):
                return None
        return calls

    def passed_accepted(self, path: str, function: str, conditions: list[ast.expr]) -> list[tuple[str, Call]] | None:
        """Each call of the function, where every one passes literals (`activation="silu"`, `"a" if x else "b"`, or a
        parameter of its caller that the caller's own calls pass literals for, a few calls up) under which one of
        `conditions` (all of which a raise needs) is false, whichever literal it is and whatever the rest of what it
        reads is (`asyncio_mode and not multiprocess_mode`, every call passing `asyncio_mode=False`). None when a
        call passes something else for what decides them, or the calls are unknown."""
        calls = self._literal_calls(path, function)
        if calls is None:
            return None
        params = self._call_params(path, function)
        tests = [(node, sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & set(params))) for node in conditions]
        for call_path, call in calls:
            given = {name: self._passed_literals(call_path, call, params, name, MAX_LITERAL_HOPS, self._defaults(path, function))
                     for name in {name for _, read in tests for name in read}}
            # a name passed no literal stays unknown: the check is ruled out where the literals alone decide it
            if not any(any(given[name] for name in read) and _never(node, {name: given[name] for name in read if given[name]})
                       for node, read in tests):
                return None
        return calls

    def _defaults(self, path: str, function: str) -> dict[str, str]:
        """The literals the function's parameters default to, by parameter."""
        d = self.definitions.get((path, function))
        return {p: v for p, v in zip(d.params, d.defaults) if v} if d is not None and d.defaults else {}

    def _literal_calls(self, path: str, function: str) -> list[tuple[str, Call]] | None:
        """calls_of, where the calls are all there are to see: not only the function's own (what calls it first does
        so by reference), not a constructor of a class others are built on or its class methods make (`cls(...)`)."""
        calls = self.calls_of(path, function)
        if not calls or all(call.caller == function for _, call in calls):
            return None
        owner, _, name = function.rpartition(".")
        cls = owner.rpartition(".")[2]
        if name == "__init__" and (self.overriding(cls, "__init__")[0] or any(c.caller.startswith(owner + ".") for _, c in self.calls.get("cls", []))):
            return None
        return calls

    def _passed_literals(self, call_path: str, call: Call, params: list[str], parameter: str, hops: int,
                         defaults: dict[str, str]) -> list[ast.expr]:
        """The literals `call` passes for `parameter`: its argument, the literal it defaults to (`defaults`, by
        parameter) where the call leaves it out, or, for a parameter of its caller passed on, what the caller's calls
        pass for it, up to `hops` calls up; [] where that is anything else."""
        argument = _argument(call, params, parameter)
        if argument is None and _left_out(call, params, parameter):
            argument = defaults.get(parameter) or None
        choices = _choices(argument)
        caller = self.definitions.get((call_path, call.caller))
        if choices or not hops or not argument or not argument.isidentifier() or caller is None or argument not in caller.params:
            return choices
        calls = self._literal_calls(call_path, call.caller)
        if calls is None:
            return []
        upper = self._call_params(call_path, call.caller)
        found: list[ast.expr] = []
        for path, up in calls:
            more = self._passed_literals(path, up, upper, argument, hops - 1, self._defaults(call_path, call.caller))
            if not more:
                return []
            found += more
        return found

    def tried(self, path: str, function: str, handler: int) -> list[Call]:
        """The calls the function makes in the body of the `try` whose handler is at line `handler`, in order."""
        self._link()
        return sorted((c for c in self._made.get((path, function), ()) if handler in c.tried), key=lambda c: c.line)

    def all_catch(self, path: str, function: str, names: set[str]) -> list[tuple[str, Call, tuple[str, int]]] | None:
        """Each call of the function with the handler around it that catches an exception of one of `names` (or all),
        when every call has one; None when some call lets it through, or the calls are unknown."""
        calls = self.calls_of(path, function)
        if not calls:
            return None
        found = []
        for call_path, call in calls:
            handler = next((h for h in call.caught if h[0] in names or h[0] == "*"), None)
            if handler is None:
                return None
            found.append((call_path, call, handler))
        return found


def _left_out(call: Call, params: list[str], parameter: str) -> bool:
    """Whether the call surely passes nothing for `parameter` (no `*args` or `**kwargs` of its own that might)."""
    at = params.index(parameter) if parameter in params else -1
    return (at >= 0 and parameter not in dict(call.keywords) and "*" not in dict(call.keywords) and "*" not in call.args
            and at >= len(call.args))


def _argument(call: Call, params: list[str], parameter: str) -> str | None:
    """The text `call` passes for `parameter`; None when it cannot be told (a starred argument before it, or it is
    left to its default, which is the function's own)."""
    keywords = dict(call.keywords)
    if parameter in keywords:
        return keywords[parameter]
    at = params.index(parameter) if parameter in params else -1
    if at < 0 or "*" in params[:at]:
        return None
    if "*" in call.args[: at + 1]:
        return None
    return call.args[at] if at < len(call.args) else None


def _choices(argument: str | None) -> list[ast.expr]:
    """The literals an argument may be: one, or the two branches of `a if x else b`; [] for anything else."""
    node = parse(argument) if argument else None
    values = [node.body, node.orelse] if isinstance(node, ast.IfExp) else [node] if node is not None else []
    return values if values and all(isinstance(v, (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.UnaryOp)) for v in values) else []


def _never(condition: ast.expr, given: dict[str, list[ast.expr]]) -> bool:
    """Whether `condition` is false for every choice of the literals given for the names it reads; False where what else
    it reads decides it, or it cannot be worked out."""
    names = list(given)
    if math.prod(len(given[name]) for name in names) > MAX_COMBOS:
        return False
    for combo in itertools.product(*(given[name] for name in names)):
        try:
            if _evaluate(condition, dict(zip(names, combo))):
                return False
        except _Unknown:
            return False
    return True


class _Unknown(Exception):
    """A condition that reads something other than literals and the names given."""


_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
            ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_,
            ast.IsNot: operator.is_not}


def _evaluate(node: ast.expr, bound: dict[str, ast.expr]) -> object:
    """The value of a condition made of literals, the names bound to literals, comparisons, `and`, `or` and `not`."""
    if isinstance(node, ast.Name) and node.id in bound:
        return _evaluate(bound[node.id], {})
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return tuple(_evaluate(e, bound) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        value = _evaluate(node.operand, bound)
        return (not value) if isinstance(node.op, ast.Not) else -value  # type: ignore[operator]
    if isinstance(node, ast.BoolOp):  # decided by one part whatever the others are: `False and x`, `True or x`
        deciding = not isinstance(node.op, ast.And)
        unknown = False
        for part in node.values:
            try:
                if bool(_evaluate(part, bound)) == deciding:
                    return deciding
            except _Unknown:
                unknown = True
        if unknown:
            raise _Unknown
        return not deciding
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        left = _evaluate(node.left, bound)
        for op, right_node in zip(node.ops, node.comparators):
            right = _evaluate(right_node, bound)
            try:
                if not _COMPARE[type(op)](left, right):
                    return False
            except TypeError as e:  # `None < 1`: Python itself would fail there
                raise _Unknown from e
            left = right
        return True
    raise _Unknown


def surely_ours(call: Call) -> bool:
    """Whether a call linked by name is a call of vLLM's function: `obj.exists()` may well be another library's."""
    return not call.method or call.receiver in ("self", "cls") or "_" in call.name.strip("_")


def _in_caller(condition: ast.expr, passed: dict[str, str | None], same_object: bool) -> ast.expr | None:
    """The condition in a caller's names: each parameter replaced by what the call passes; None where it reads
    something else the caller cannot see (a local, `self` of another object, a value the call does not name)."""
    def swap(node: ast.AST) -> ast.AST | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):  # `len(x)`, `is_uva_available()`: a function
            called = ast.Call(func=node.func, args=[swap(a) for a in node.args], keywords=[])
            return None if node.keywords or any(a is None for a in called.args) else called
        if isinstance(node, ast.Name) and node.id in passed:
            return parse(passed[node.id]) if passed[node.id] else None
        if isinstance(node, ast.Name) and node.id in ("self", "cls") and not same_object:
            return None
        if isinstance(node, ast.Name) and not node.id[:1].isupper():
            return None  # a local of the function: the caller knows nothing of it
        for name, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                new = swap(value)
                if new is None:
                    return None
                setattr(node, name, new)
            elif isinstance(value, list):
                for k, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        new = swap(item)
                        if new is None:
                            return None
                        value[k] = new
        return node

    found = swap(copy.deepcopy(condition))
    return found if isinstance(found, ast.expr) else None


def parse(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None

