"""Small git repositories for tests: one tagged commit per release, at fixed dates."""

from __future__ import annotations

import pathlib

import git

# Each release is committed at its own fixed time, written with a +02:00 offset to prove the UTC conversion.
DATES = [f"2025-01-{day:02d}T12:00:00+02:00" for day in range(1, 29)]
UTC_DATES = [f"2025-01-{day:02d}T10:00:00+00:00" for day in range(1, 29)]


def make_repo(tmp_path: pathlib.Path, releases: dict[str, dict[str, str]], name: str = "origin") -> pathlib.Path:
    """A repository with one commit per release, each adding its files on top of the last and tagged with its name."""
    path = tmp_path / name
    with git.Repo.init(path, initial_branch="main") as r:
        for tag, files in releases.items():
            add_release(r, tag, files)
    return path


def add_release(r: git.Repo, tag: str, files: dict[str, str]) -> None:
    root = pathlib.Path(r.working_tree_dir)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if files:
        r.git.add("--", *files)
    date = DATES[len(r.tags)]
    env = {
        "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_COMMITTER_DATE": date,
    }
    r.git.commit("--quiet", "--allow-empty", "-m", tag, env=env)
    r.git.tag(tag)
