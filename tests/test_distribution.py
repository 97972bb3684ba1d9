"""What a pip-installed vllm-errors answers with: the bundle (`vllm-errors bundle`), a published site read over
HTTP and cached, `--version`, and the vLLM plugin driven through a small fake `vllm` package that loads
plugins and logs a fatal error the way vLLM does."""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import os
import subprocess
import sys
import threading
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from vllm_errors import bundle, resources
from vllm_errors.cli import main
from vllm_errors.plugin import PREFIX

from test_lookup import EXPLAIN, RELEASE, site  # noqa: F401 (site: the fixture, a site built from RELEASE)


@pytest.fixture(scope="module")
def bundle_dir(site, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle")
    sizes = bundle.write_bundle(site, out)
    assert set(sizes) == {bundle.INDEX, bundle.RECORDS, bundle.RELEASES} and all(size > 0 for size in sizes.values())
    return out


def block_size_id(site: Path) -> str:
    (error,) = [e for e in json.loads((site / "api" / "errors.json").read_text())["errors"] if e["template"].startswith("Unsupported block size")]
    return error["id"]


def test_the_bundle_is_the_sites_index_and_each_records_answer(site, bundle_dir):
    index = json.loads(gzip.decompress((bundle_dir / bundle.INDEX).read_bytes()))
    assert index == json.loads((site / "api" / "lookup.json").read_text())
    records = json.loads(gzip.decompress((bundle_dir / bundle.RECORDS).read_bytes()))
    assert set(records) == {e["i"] for e in index["errors"]}
    full = json.loads((site / "api" / "errors" / f"{block_size_id(site)}.json").read_text())
    assert records[full["id"]] == bundle.compact(full) and records[full["id"]]["annotation"]["meaning"] == full["annotation"]["meaning"]
    again = bundle.write_bundle(site, bundle_dir.parent / "again")
    assert (bundle_dir.parent / "again" / bundle.INDEX).read_bytes() == (bundle_dir / bundle.INDEX).read_bytes(), again


def test_explain_from_the_bundle_says_what_the_site_says_with_links_to_the_published_site(site, bundle_dir, monkeypatch, capsys):
    assert main(["explain", EXPLAIN, "--site", str(site)]) == 0
    local = capsys.readouterr().out
    monkeypatch.setenv(bundle.BUNDLE_ENV, str(bundle_dir))
    monkeypatch.setenv(bundle.SITE_URL_ENV, "https://errors.example/docs")
    monkeypatch.setattr(bundle, "IN_CHECKOUT", False)  # as installed from the wheel: no checkout's build to prefer
    assert main(["explain", EXPLAIN]) == 0
    bundled = capsys.readouterr().out
    page = f"errors/{block_size_id(site)}.html"
    assert f"More: https://errors.example/docs/{page}" in bundled
    assert bundled == local.replace(str(site / page), f"https://errors.example/docs/{page}")


def test_version_names_the_releases_the_bundle_covers(bundle_dir, monkeypatch, capsys):
    monkeypatch.setenv(bundle.BUNDLE_ENV, str(bundle_dir))
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and "errors of vLLM v1 (bundled index)" in capsys.readouterr().out
    monkeypatch.setenv(bundle.BUNDLE_ENV, str(bundle_dir / "nowhere"))
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "no bundled index" in capsys.readouterr().out


def test_bundle_without_a_built_site_says_what_to_do(tmp_path, capsys):
    assert main(["bundle", "--site", str(tmp_path), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "no lookup index" in err and "build the site first" in err and "Traceback" not in err


@pytest.fixture()
def published(site):
    """The built site served over HTTP on loopback, as GitHub Pages would serve it."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_explain_reads_a_published_site_and_answers_offline_from_what_it_cached(site, published, tmp_path, monkeypatch, capsys):
    server, url = published
    monkeypatch.setenv("VLLM_ERRORS_CACHE", str(tmp_path / "cache"))
    answered: list[int] = []  # the status of each request the server answered
    handler = server.RequestHandlerClass
    monkeypatch.setattr(handler.func, "log_request", lambda self, code="-", size="-": answered.append(int(code)), raising=False)
    assert main(["explain", EXPLAIN, "--site", url]) == 0
    online = capsys.readouterr().out
    assert f"More: {url}errors/{block_size_id(site)}.html" in online and answered == [200, 200]
    assert main(["explain", EXPLAIN, "--site", url]) == 0  # unchanged files: 304s, no bodies, the same answer
    assert capsys.readouterr().out == online and answered[2:] == [304, 304]
    server.shutdown()
    server.server_close()
    assert main(["explain", EXPLAIN, "--site", url]) == 0  # the server is gone: the cache answers
    assert capsys.readouterr().out == online
    assert main(["explain", "AssertionError: step needs its scheduler output", "--site", url]) == 2  # never fetched
    err = capsys.readouterr().err
    assert err.startswith("vllm-errors: error: cannot read ") and "check the network" in err and err.count("\n") == 1


# The plugin, in a process of its own that imports a fake `vllm`: vllm/plugins/__init__.py below loads the
# `vllm.general_plugins` entry points as vLLM 0.34.0's load_plugins_by_group and load_general_plugins do
# (tests/test_real_plugin.py runs vLLM's own file instead); vllm/logger.py configures the `vllm` logger as
# vLLM's DEFAULT_LOGGING_CONFIG does (one stream handler, propagate off); vllm/entry.py calls the release's
# code the site was built from (test_lookup.RELEASE), which raises; it logs "EngineCore failed to start." with
# the exception and raises again, as run_engine_core does.
FAKE_VLLM = {
    **RELEASE,
    "vllm/envs.py": "import os\nVLLM_PLUGINS = None if 'VLLM_PLUGINS' not in os.environ else os.environ['VLLM_PLUGINS'].split(',')\n",
    "vllm/plugins/__init__.py": (
        "import logging\n"
        "from importlib.metadata import entry_points\n"
        "import vllm.envs as envs\n"
        "logger = logging.getLogger(__name__)\n"
        "plugins_loaded = False\n"
        "def load_general_plugins():\n"
        "    global plugins_loaded\n"
        "    if plugins_loaded:\n"
        "        return\n"
        "    plugins_loaded = True\n"
        "    for plugin in entry_points(group='vllm.general_plugins'):\n"
        "        if envs.VLLM_PLUGINS is None or plugin.name in envs.VLLM_PLUGINS:\n"
        "            try:\n"
        "                func = plugin.load()\n"
        "            except Exception:\n"
        "                logger.exception('Failed to load plugin %s', plugin.name)\n"
        "                continue\n"
        "            func()\n"
    ),
    "vllm/logger.py": (
        "import logging, sys\n"
        "handler = logging.StreamHandler(sys.stdout)\n"
        "handler.setFormatter(logging.Formatter('%(levelname)s [%(name)s] %(message)s'))\n"
        "root = logging.getLogger('vllm')\n"
        "root.addHandler(handler)\n"
        "root.setLevel(logging.DEBUG)\n"
        "root.propagate = False\n"
        "def init_logger(name):\n"
        "    return logging.getLogger(name)\n"
    ),
    "vllm/entry.py": (
        "from vllm.config.cache import CacheConfig\n"
        "from vllm.logger import init_logger\n"
        "from vllm.plugins import load_general_plugins\n"
        "logger = init_logger('vllm.v1.engine.core')\n"
        "def run_engine_core():\n"
        "    load_general_plugins()\n"
        "    for n in range(3):\n"
        "        logger.info('step %d', n)\n"
        "    try:\n"
        "        CacheConfig().verify(12, [8, 16, 32])\n"
        "    except Exception:\n"
        "        logger.exception('EngineCore failed to start.')\n"
        "        raise\n"
        "if __name__ == '__main__':\n"
        "    run_engine_core()\n"
    ),
}


def fake_vllm(root: Path, files: dict[str, str] = FAKE_VLLM) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def run_engine(root: Path, bundle_dir: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_ERRORS_", "VLLM_PLUGINS"))}
    environ.update(PYTHONPATH=str(root), VLLM_ERRORS_BUNDLE=str(bundle_dir), VLLM_ERRORS_SITE_URL="https://errors.example/", **env)
    return subprocess.run([sys.executable, "-m", "vllm.entry"], cwd=root, env=environ, capture_output=True, text=True, timeout=120)


def without_plugin_lines(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if PREFIX not in line)


def test_the_plugin_is_an_entry_point_vllm_loads():
    (plugin,) = [p for p in entry_points(group="vllm.general_plugins") if p.name == "vllm_errors"]
    assert plugin.value == "vllm_errors.plugin:register" and callable(plugin.load())


def test_the_plugin_follows_a_fatal_error_with_its_page_and_changes_nothing_else(site, bundle_dir, tmp_path):
    root = fake_vllm(tmp_path)
    on = run_engine(root, bundle_dir)
    off = run_engine(root, bundle_dir, VLLM_ERRORS_PLUGIN="0")
    line = f"{PREFIX}ValueError: Unsupported block size: {{block_size}}. Choose one of {{choices}}. — https://errors.example/errors/{block_size_id(site)}.html"
    # The log: vLLM's record with its traceback, then one line through vLLM's logger; stderr: the traceback
    # that ends the process, then the same line once more is not printed (one line per exception).
    assert on.stdout.count(PREFIX) == 1 and on.stderr.count(PREFIX) == 0
    logged = on.stdout.splitlines()
    at = logged.index(f"ERROR [vllm.vllm_errors] {line}")
    assert logged[at - 1].startswith("ValueError: Unsupported block size: 12") and "ERROR [vllm.v1.engine.core] EngineCore failed to start." in logged
    # Nothing else changes: the same exit status, the same log and the same traceback with the plugin off.
    assert on.returncode == off.returncode == 1
    assert without_plugin_lines(on.stdout) == off.stdout and on.stderr == off.stderr
    assert off.stderr.rstrip().endswith("ValueError: Unsupported block size: 12. Choose one of [8, 16, 32].")


def test_the_plugin_follows_an_exception_that_ends_the_process_on_standard_error(site, bundle_dir, tmp_path):
    files = dict(FAKE_VLLM)
    files["vllm/entry.py"] = files["vllm/entry.py"].replace("        logger.exception('EngineCore failed to start.')\n", "")
    root = fake_vllm(tmp_path, files)
    on = run_engine(root, bundle_dir)
    off = run_engine(root, bundle_dir, VLLM_ERRORS_PLUGIN="0")
    assert on.stdout == off.stdout and PREFIX not in on.stdout
    assert on.stderr.endswith(f"{PREFIX}ValueError: Unsupported block size: {{block_size}}. Choose one of {{choices}}. — https://errors.example/errors/{block_size_id(site)}.html\n")
    assert without_plugin_lines(on.stderr) == off.stderr and on.returncode == off.returncode == 1


def test_the_plugin_never_raises_and_says_nothing_it_cannot_answer(bundle_dir, tmp_path):
    root = fake_vllm(tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / bundle.INDEX).write_bytes(b"not gzip")
    (broken / bundle.RECORDS).write_bytes(b"not gzip")
    spoiled = run_engine(root, broken)
    off = run_engine(root, broken, VLLM_ERRORS_PLUGIN="0")
    assert (spoiled.stdout, spoiled.stderr, spoiled.returncode) == (off.stdout, off.stderr, off.returncode)
    files = dict(FAKE_VLLM)
    files["vllm/entry.py"] = files["vllm/entry.py"].replace("CacheConfig().verify(12, [8, 16, 32])", "{}['missing']")
    unknown = run_engine(fake_vllm(tmp_path / "other", files), bundle_dir)
    assert PREFIX not in unknown.stdout + unknown.stderr and "KeyError: 'missing'" in unknown.stderr


@pytest.mark.real
def test_vllms_own_plugin_loader_calls_the_plugin(site, bundle_dir, tmp_path):
    """vLLM 0.34.0's vllm/plugins/__init__.py, read from the mirror, in place of the fake's loader."""
    mirror = os.environ.get("VLLM_ERRORS_MIRROR")
    if not mirror:
        pytest.skip("VLLM_ERRORS_MIRROR names no release mirror")
    import git

    files = dict(FAKE_VLLM)
    files["vllm/plugins/__init__.py"] = git.Repo(mirror).git.show("v0.34.0:vllm/plugins/__init__.py")
    assert "def load_general_plugins" in files["vllm/plugins/__init__.py"] and "DEFAULT_PLUGINS_GROUP" in files["vllm/plugins/__init__.py"]
    root = fake_vllm(tmp_path, files)
    on = run_engine(root, bundle_dir)
    assert on.stdout.count(f"ERROR [vllm.vllm_errors] {PREFIX}ValueError: Unsupported block size") == 1
    assert on.stdout.count(PREFIX) == 1 and on.returncode == 1
    only_others = run_engine(root, bundle_dir, VLLM_PLUGINS="another_plugin")  # vLLM's allow-list leaves it out
    assert PREFIX not in only_others.stdout + only_others.stderr


def test_the_wheel_carries_every_module_and_every_file_a_build_reads(site, bundle_dir, tmp_path):
    """The wheel a plain `pip install .` installs, built here and run unpacked away from the checkout: every
    module of the package, the templates, the hand-written pages and assets, mkdocs.yml, the annotations and
    the bundle, under the import name vllm_errors."""
    import shutil
    import zipfile

    checkout = Path(__file__).resolve().parent.parent
    tree = tmp_path / "checkout"
    shutil.copytree(checkout, tree, ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "__pycache__", "*.egg-info", ".hypothesis", "bundle"))
    shutil.copytree(bundle_dir, tree / "extractor" / "bundle")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", str(tmp_path / "dist")],
                          cwd=tree, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "dist").glob("vllm_errors-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {f"vllm_errors/{p.relative_to(checkout / 'extractor')}" for p in (checkout / "extractor").rglob("*.py")}
    assert modules <= names
    for name in resources.DATA:  # what resources looks for: the build step (_wheel.DATA, a list of its own) must copy it
        files = (checkout / name).rglob("*") if (checkout / name).is_dir() else [checkout / name]
        wanted = {f"vllm_errors/{p.relative_to(checkout)}" for p in files
                  if p.is_file() and "candidates" not in p.parts and p.name != "refreshed.json" and "__pycache__" not in p.parts}
        assert wanted and wanted <= names, name
    assert {f"vllm_errors/bundle/{bundle.INDEX}", f"vllm_errors/bundle/{bundle.RECORDS}"} <= names
    assert not any(n.startswith("extractor/") for n in names)
    entry_points_txt = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "vllm-errors = vllm_errors.cli:main" in entry_points_txt and "vllm_errors = vllm_errors.plugin:register" in entry_points_txt

    unpacked = tmp_path / "installed"
    zipfile.ZipFile(wheel).extractall(unpacked)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_ERRORS_")}
    environ["PYTHONPATH"] = str(unpacked)
    environ["VLLM_ERRORS_SITE_URL"] = "https://errors.example/"
    code = ("import vllm_errors.resources as r, vllm_errors.render as t, vllm_errors.pipeline as p;"
            "print(r.IN_CHECKOUT, r.DATA_DIR == r.PACKAGE_DIR, t.TEMPLATES.is_dir(), p.BuildRequest.config_file.is_file(),"
            " p.ANNOTATIONS_DIR.is_dir(), p.BuildRequest.site_dir.parent.parent == r.WORK_DIR)")
    said = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=environ, capture_output=True, text=True, timeout=120)
    assert said.stdout.split() == ["False", "True", "True", "True", "True", "True"], said.stderr
    explained = subprocess.run([sys.executable, "-m", "vllm_errors.cli", "explain", EXPLAIN], cwd=elsewhere, env=environ,
                               capture_output=True, text=True, timeout=120)
    assert explained.returncode == 0 and f"More: https://errors.example/errors/{block_size_id(site)}.html" in explained.stdout, explained.stderr
