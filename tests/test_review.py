"""bench/review.py: the sample is fixed by its seed, packets say what the page claims and where to check it, the tally counts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import review  # noqa: E402


def fake_site(root: Path) -> Path:
    errors = []
    for k in range(6):
        error_id = f"{k:016x}"
        refs = ["v1", "v2"] if k else ["v1"]  # error 0 is gone in v2, the newest
        record = {
            "id": error_id, "title": f"ValueError: bad {k}", "exception": "ValueError",
            "annotation": {"kind": "internal" if k == 1 else "user", "meaning": "It means something.", "triggers": ["Raised when x."],
                           "situations": [], "solutions": ["Pass `--flag 1`."], "example_fix": None},
            "sites": [{"path": "vllm/a.py", "line": 50 + k, "end_line": 51 + k, "function": "A.check"}],
            "history": {"releases": [{"ref": r} for r in refs]},
            "reports": [{"url": f"https://github.com/o/r/issues/{k}{n}", "title": f"crash {n}", "version": "0.9.1", "resolution": None}
                        for n in range(k % 4)],
        }
        (root / "api" / "errors").mkdir(parents=True, exist_ok=True)
        (root / "api" / "errors" / f"{error_id}.json").write_text(json.dumps(record))
        errors.append({"id": error_id})
    (root / "api" / "errors.json").write_text(json.dumps({"snapshot": {"ref": "v2"}, "errors": errors}))
    return root


def test_sample_is_seeded_takes_the_newest_release_and_tally_counts(tmp_path, capsys):
    site = fake_site(tmp_path / "site")
    assert review.main(["sample", "--site", str(site), "--out", str(tmp_path / "a"), "--n", "3", "--seed", "7"]) == 0
    assert review.main(["sample", "--site", str(site), "--out", str(tmp_path / "b"), "--n", "3", "--seed", "7"]) == 0
    first = json.loads((tmp_path / "a" / "sample.json").read_text())
    assert first == json.loads((tmp_path / "b" / "sample.json").read_text())
    assert len(first["ids"]) == 3 and "0000000000000000" not in first["ids"]  # gone before the newest release
    text = (tmp_path / "a" / f"{first['ids'][0]}.md").read_text()
    assert "Pass `--flag 1`." in text and "git show v2:vllm/a.py" in text
    for k, error_id in enumerate(first["ids"]):
        verdict = {"id": error_id, "trigger_correct": True, "solutions_are_levers": k != 0, "stops_the_raise": True,
                   "invented": ["made up"] if k == 2 else [], "meaning_adds": True, "kind_correct": True, "usefulness": 2 + k}
        (tmp_path / "a" / f"{error_id}.verdict.json").write_text(json.dumps(verdict))
    capsys.readouterr()
    assert review.main(["tally", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "pages reviewed: 3 of 3" in out and "correct and actionable: 1 (33%)" in out
    assert "invented facts: 1 on 1 pages" in out and "usefulness: mean 3.0 of 5" in out


def test_like_takes_the_errors_of_an_earlier_sample_that_the_site_still_has(tmp_path):
    site = fake_site(tmp_path / "site")
    (tmp_path / "earlier.json").write_text(json.dumps({"ids": ["0000000000000003", "0000000000000000", "0000000000000001"]}))
    assert review.main(["sample", "--site", str(site), "--out", str(tmp_path / "c"), "--like", str(tmp_path / "earlier.json")]) == 0
    assert json.loads((tmp_path / "c" / "sample.json").read_text())["ids"] == ["0000000000000003", "0000000000000001"]


def test_reported_draws_from_the_most_reported_errors_and_packets_list_the_threads(tmp_path):
    site = fake_site(tmp_path / "site")
    assert review.main(["sample", "--site", str(site), "--out", str(tmp_path / "r"), "--n", "2", "--reported", "2"]) == 0
    chosen = json.loads((tmp_path / "r" / "sample.json").read_text())["ids"]
    assert sorted(chosen) == ["0000000000000002", "0000000000000003"]  # 3 and 2 reports; 1 and 5 have 1, 4 none
    text = (tmp_path / "r" / "0000000000000003.md").read_text()
    assert "https://github.com/o/r/issues/32: crash 2 (vLLM 0.9.1)" in text
    assert review.main(["sample", "--site", str(site), "--out", str(tmp_path / "s"), "--n", "2", "--reported", "2",
                        "--exclude", str(tmp_path / "r" / "sample.json")]) == 0
    assert sorted(json.loads((tmp_path / "s" / "sample.json").read_text())["ids"]) == ["0000000000000001", "0000000000000005"]


def test_tally_of_a_folder_without_a_sample_says_so_in_one_line(tmp_path, capsys):
    assert review.main(["tally", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert "holds no sample.json" in err and len(err.strip().splitlines()) == 1


def test_the_packet_of_an_internal_error_shows_the_report_section_its_page_has(tmp_path):
    site = fake_site(tmp_path / "site")
    record = json.loads((site / "api" / "errors" / "0000000000000001.json").read_text())
    text = review.packet(record, "v2")
    said = "This check guards an assumption inside vLLM, so there is usually nothing to change in your setup"
    assert said in text
    template = (Path(__file__).resolve().parent.parent / "templates" / "error.md.jinja2").read_text()
    assert said in " ".join(template.split())  # the page's words, not the packet's own
    assert said not in review.packet(json.loads((site / "api" / "errors" / "0000000000000002.json").read_text()), "v2")
