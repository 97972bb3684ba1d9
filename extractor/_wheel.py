"""The wheel's build step (pyproject.toml's cmdclass): the modules as usual, then the files a build and
`explain` read (resources.DATA and the bundle) copied under the package, where resources finds them."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools.command.build_py import build_py

DATA = ("mkdocs.yml", "templates", "site", "annotations")  # resources.DATA; this module is loaded on its own


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the checkout itself
            return
        package = Path(self.build_lib) / "vllm_errors"
        for name in DATA:
            source = Path(name)
            if source.is_dir():
                shutil.copytree(source, package / name, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "candidates", "refreshed.json"))
            else:
                shutil.copy2(source, package / name)
        bundle = Path("extractor") / "bundle"  # resources.BUNDLE_DIR: written by `vllm-errors bundle`, not in git
        if bundle.is_dir():
            shutil.copytree(bundle, package / "bundle", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
