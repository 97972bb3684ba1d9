"""Where the files beside the code are found: in a checkout, the project's own folders; installed from a wheel,
the copies the wheel carries inside the package (`_wheel.BuildPy` puts them there)."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
_CHECKOUT = PACKAGE_DIR.parent
# A checkout (the editable install's case) has the project's files beside the package folder.
IN_CHECKOUT = (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "templates").is_dir()

# What a build reads besides the code: the mkdocs configuration, the page templates, the hand-written pages
# and assets (mkdocs' docs_dir) and the curated annotations. The wheel carries each under the package.
DATA = ("mkdocs.yml", "templates", "site", "annotations")
DATA_DIR = _CHECKOUT if IN_CHECKOUT else PACKAGE_DIR
# Where builds go: the checkout's build/, or build/ in the working directory of an installed CLI.
WORK_DIR = _CHECKOUT if IN_CHECKOUT else Path.cwd()
# The lookup index and the records `explain` prints, made from a built site by `vllm-errors bundle`
# (not in git: generated) and carried by the wheel.
BUNDLE_DIR = PACKAGE_DIR / "bundle"
