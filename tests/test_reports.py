"""Public reports (annotations/reports/): read strictly, carried along an error's rewordings, shown on pages, ranked."""

from __future__ import annotations

import json
from dataclasses import replace

import jsonschema
import pytest

from vllm_errors import api, render
from vllm_errors.model import Appearance, ErrorHistory, History, Report, UserError, record_to_data
from vllm_errors.reports import along_lineage, dump_reports, load_reports, parse_reports

from test_render import FULL, MANY, kb

OLD, NEW, OTHER = "a" * 16, "b" * 16, "c" * 16

GOOD = """\
error: "ValueError: too long"
reports:
- url: https://github.com/vllm-project/vllm/issues/2418
  title: "ValueError: too long <script>"
  opened: 2024-01-11
  state: closed
  version: 0.2.7
  release: v0.4.1
  resolution: "`--max-model-len 4096` made it start."
  checked: v0.4.1 vllm/worker/worker.py:565, the message and the traceback
- url: https://github.com/acme/app/issues/7
  title: Crash at startup
  checked: v0.9.1 vllm/config.py:100
"""


def report(url, opened=None, error=OLD, **kw):
    return Report(url=url, title=f"title of {url[-3:]}", checked="v0.9.1 vllm/x.py:1", opened=opened, error=error, **kw)


def test_a_reports_file_is_read_with_every_field():
    first, second = parse_reports("annotations/reports/x.yaml", GOOD, OLD)
    assert first.url.endswith("/2418") and first.opened == "2024-01-11" and first.state == "closed"
    assert first.version == "0.2.7" and first.release == "v0.4.1" and first.error == OLD
    assert first.resolution == "`--max-model-len 4096` made it start."
    assert second.opened is None and second.resolution is None and second.title == "Crash at startup"


@pytest.mark.parametrize(
    "change, fault",
    [
        (("https://github.com/vllm-project/vllm/issues/2418", "https://example.com/issues/1"), "reports[0].url"),
        (("  checked: v0.9.1 vllm/config.py:100\n", "  checked: ' '\n"), "reports[1].checked: Value error, is empty"),
        (("  state: closed\n", "  state: fixed\n"), "reports[0].state"),
        (("  version: 0.2.7\n", "  versoin: 0.2.7\n"), "the fields are url, title"),
        (("https://github.com/acme/app/issues/7", "https://github.com/vllm-project/vllm/issues/2418"), "listed already at line 3"),
        (('made it start."', 'made it start.\\nand more"'), "one line"),
        (("  opened: 2024-01-11\n", "  opened: last week\n"), "reports[0].opened"),
    ],
)
def test_a_mistake_in_a_reports_file_names_the_file_line_and_field(change, fault):
    with pytest.raises(UserError) as e:
        parse_reports("annotations/reports/x.yaml", GOOD.replace(*change), OLD)
    assert str(e.value).startswith("annotations/reports/x.yaml:") and fault in str(e.value)


def test_a_reports_file_is_named_after_its_error(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / f"{OLD}.yaml").write_text(GOOD)
    (folder / "candidates").mkdir()  # waiting to be confirmed: not read
    (folder / "candidates" / f"{NEW}.yaml").write_text("not: [valid")
    assert [r.error for r in load_reports(folder)[OLD]] == [OLD, OLD]
    (folder / "kv-cache.yaml").write_text(GOOD)
    with pytest.raises(UserError, match="named after its error's id"):
        load_reports(folder)


def test_the_dumped_file_reads_back_the_same():
    reports = parse_reports("x", GOOD, OLD)
    again = parse_reports("x", dump_reports("ValueError: too long", reports), OLD)
    assert sorted(again, key=lambda r: r.url) == sorted(reports, key=lambda r: r.url)


def history(**errors) -> dict[str, ErrorHistory]:
    return {i: ErrorHistory(releases=(Appearance("v1", "c", ()),), status="current", supersedes=tuple(s)) for i, s in errors.items()}


def test_reports_of_an_earlier_wording_follow_the_error_newest_first():
    reports = {
        OLD: (report("https://github.com/o/r/issues/1", "2024-01-01"), report("https://github.com/o/r/issues/2", "2025-01-01")),
        NEW: (report("https://github.com/o/r/issues/3", "2024-06-01", error=NEW), report("https://github.com/o/r/issues/2", "2025-01-01", error=NEW)),
    }
    hist = history(**{OLD: (), NEW: (OLD,), OTHER: ()})
    gathered = along_lineage(reports, {**hist, OLD: replace(hist[OLD], status="removed")})
    assert [r.url[-1] for r in gathered[NEW]] == ["2", "3", "1"]  # one per thread, newest first
    assert [r.url[-1] for r in gathered[OLD]] == ["2", "1"]  # the old page keeps its own
    assert OTHER not in gathered
    assert along_lineage(reports, None)[NEW] == tuple(sorted(reports[NEW], key=lambda r: r.opened, reverse=True))


def test_a_page_lists_its_reports_with_what_helped_and_the_index_ranks_errors():
    two = (report("https://github.com/vllm-project/vllm/issues/2418", "2024-01-11", state="closed", version="0.2.7",
                  resolution="`--max-model-len 4096` made it start."),
           replace(report("https://github.com/acme/app/issues/7"), title="Crash <script>alert(1)</script> | x"))
    one = (report("https://github.com/o/r/issues/9", "2025-02-02"),)
    pages = render.render_pages(kb((replace(FULL, reports=one), replace(MANY, reports=two))))
    page = pages[f"errors/{MANY.id}.md"]
    assert "Reported 2 times in public issues, newest first" in page
    assert "[title of 418](https://github.com/vllm-project/vllm/issues/2418): vllm\\-project/vllm\\#2418, opened 2024-01-11, closed, vLLM 0\\.2\\.7." in page
    assert "**In the thread, on vLLM 0\\.2\\.7:** `--max-model-len 4096` made it start." in page  # what helped, then
    assert "<script>" not in page and "Crash &lt;script&gt;" in page
    ranked = pages["reported.md"]
    assert ranked.index(f"errors/{MANY.id}.md") < ranked.index(f"errors/{FULL.id}.md")
    assert "2 errors with 3 reports in all" in ranked
    nav = json.loads(pages["generated/nav.json"])["nav"]
    assert nav[0] == {"Most reported": "reported.md"}


def test_a_thread_titled_only_with_its_forms_tag_is_shown_as_untitled():
    bare = (replace(report("https://github.com/vllm-project/vllm/issues/29636"), title="[Bug]:"),)
    page = render.render_pages(kb((replace(MANY, reports=bare),)))[f"errors/{MANY.id}.md"]
    assert "[\\[Bug\\]: \\(no title\\)](https://github.com/vllm-project/vllm/issues/29636): vllm\\-project/vllm\\#29636" in page


def test_an_error_without_reports_says_nothing_of_them():
    pages = render.render_pages(kb((FULL,)))
    assert "public issues" not in pages[f"errors/{FULL.id}.md"]
    assert "No error of these releases has a public report" in pages["reported.md"]


def test_the_api_carries_the_reports_and_its_schema_accepts_them():
    record = replace(MANY, reports=(report("https://github.com/o/r/issues/1", "2024-01-01", resolution="upgrade"),))
    data = record_to_data(record)
    assert data["reports"][0]["url"] == "https://github.com/o/r/issues/1" and data["reports"][0]["resolution"] == "upgrade"
    jsonschema.validate(data, api.strict_schema())
    files = api.render_api(kb((record, FULL)))
    index = json.loads(files["api/errors.json"])["errors"]
    assert {e["id"]: e["reports"] for e in index} == {MANY.id: 1, FULL.id: 0}


def test_the_report_weighs_note_coverage_by_how_often_errors_are_reported():
    from vllm_errors.cli import reports_line
    from vllm_errors.model import Annotation

    noted = replace(MANY, reports=tuple(report(f"https://github.com/o/r/issues/{n}") for n in range(3)),
                    annotation=Annotation(meaning="m", sources={"meaning": "curated"}))
    plain = replace(FULL, reports=(report("https://github.com/o/r/issues/9"),), annotation=Annotation(meaning="m", sources={"meaning": "derived"}))
    line = reports_line(kb((noted, plain)))
    assert line.startswith("public reports: 4 on 2 errors; curated notes cover 3 of them (75.0% of reported occurrences) on 1 errors")
    assert line.endswith("errors reported twice or more: 1, with a note: 1")


W_OLD, W_NEW = "d" * 16, "e" * 16


def test_a_wrappers_root_causes_are_the_errors_reported_before_it_most_reported_first():
    from vllm_errors.reports import root_causes

    def r(n, *wrapped):
        return report(f"https://github.com/o/r/issues/{n}", wrapped_by=wrapped)

    reports = {OLD: (r(1, W_OLD), r(2, W_NEW), r(3)), NEW: (r(4, W_NEW),), OTHER: (r(5, W_NEW), r(6, W_NEW), r(7, W_NEW))}
    hist = {W_OLD: ErrorHistory(releases=(), status="removed", superseded_by=W_NEW), W_NEW: ErrorHistory(releases=(), status="current"),
            OLD: ErrorHistory(releases=(), status="removed", superseded_by=NEW), NEW: ErrorHistory(releases=(), status="current")}
    causes = root_causes(reports, hist, {OLD, NEW, OTHER, W_OLD, W_NEW})
    # OLD is counted on NEW's page only (its successor is there); a report behind the old wording counts for the new one
    assert causes[W_NEW] == (OTHER, NEW) and causes == {W_NEW: (OTHER, NEW)}
    assert root_causes(reports, hist, {OLD, OTHER})[W_NEW] == (OTHER, OLD)  # NEW not built: OLD stands for itself
    assert root_causes(reports, None, {OLD})[W_OLD] == (OLD,)


def test_a_wrappers_page_and_the_explain_command_list_its_root_causes(tmp_path, monkeypatch):
    from vllm_errors import cli
    from test_lookup import CASES, VECTORS, answer_of, PREPARED

    wrapper = replace(FULL, template="Engine core initialization failed. See root cause above.", wrapper="points", root_causes=(MANY.id,))
    cause = replace(MANY, reports=(report("https://github.com/o/r/issues/1", wrapped_by=(FULL.id,)),))
    page = render.render_pages(kb((wrapper, cause)))[f"errors/{FULL.id}.md"]
    assert "**The errors reported most often behind it**" in page and f"]({MANY.id}.md) (1 report)" in page
    assert "behind it" not in render.render_pages(kb((replace(wrapper, root_causes=()), cause)))[f"errors/{FULL.id}.md"]

    index = json.loads(json.dumps(VECTORS["index"]))
    _, answer = answer_of(PREPARED, CASES["wrapper alone"])
    shown = answer.finding.matches[0].id
    entry = next(e for e in index["errors"] if e["i"] == shown)
    cause_entry = next(e for e in index["errors"] if not e.get("w"))
    entry["c"] = [cause_entry["i"]]
    monkeypatch.setattr(cli, "explanation", lambda record, best, site: [])
    from vllm_errors.bundle import Site

    lines = cli.answer_lines(answer, Site("vectors", index, lambda error_id: {}, lambda rel: str(tmp_path / rel)))
    at = lines.index("The errors reported most often behind it, in public issues:")
    assert lines[at + 1].startswith(f"  {cause_entry['n']}  ->  ")


def test_a_wrapper_also_lists_the_reported_errors_whose_page_says_they_end_the_phase_it_reports():
    from vllm_errors.annotate import ENGINE_FAILED
    from vllm_errors.catalog import build_catalog
    from vllm_errors.knowledge import build_knowledge_base
    from vllm_errors.model import Annotation, Snapshot
    from vllm_errors.scanner import scan_module

    code = ("def start(procs, size, n):\n"
            "    if procs:\n"
            "        raise RuntimeError(f'Engine core initialization failed. See root cause above. Failed core proc(s): {procs}')\n"
            "    if size > 8:\n"
            "        raise ValueError(f'Block size {size} is too large for this model')\n"
            "    if n > 2:\n"
            "        raise ValueError(f'Too many schedulers were configured: {n}')\n")
    catalog = build_catalog(Snapshot("vllm-project/vllm", "v1", "c" * 40, "2025-01-01T00:00:00+00:00", "c" * 40, None),
                            [scan_module("vllm/v1/engine/core.py", code.encode())], 1)
    ids = {e.template.split(" ")[0]: e.id for e in catalog.errors}
    startup = {ids["Block"], ids["Too"]}

    def derived(error):
        return Annotation(meaning=f"It checks a setting. {ENGINE_FAILED}" if error.id in startup else "It checks a setting.")

    def curated(error):  # a note's meaning replaces the derived one: the phase is still known
        return Annotation(meaning="Written by hand.", sources={"meaning": "curated"}) if error.id == ids["Block"] else Annotation()

    reports = {ids["Block"]: (report("https://github.com/o/r/issues/1", error=ids["Block"]),),
               ids["Too"]: tuple(report(f"https://github.com/o/r/issues/{n}", error=ids["Too"]) for n in (2, 3))}
    kb = build_knowledge_base(catalog, (derived, curated), reports=reports)
    by_id = {r.id: r for r in kb.records}
    assert by_id[ids["Engine"]].root_causes == (ids["Too"], ids["Block"])  # most reported first
    assert by_id[ids["Block"]].annotation.meaning == "Written by hand." and by_id[ids["Block"]].root_causes == ()
    assert not any(r.root_causes for r in build_knowledge_base(catalog, (derived,), reports={}).records)


def test_the_dataset_in_the_repository_reads_and_holds_the_first_edition():
    from vllm_errors.pipeline import ANNOTATIONS_DIR

    dataset = load_reports(ANNOTATIONS_DIR / "reports")
    reports = [r for found in dataset.values() for r in found]
    assert len(reports) >= 400 and len(dataset) >= 200
    for r in reports:  # each names the release whose source it was matched against, and how
        assert r.release and r.release in r.checked and r.title
    assert len({(r.error, r.url) for r in reports}) == len(reports)


def test_an_earlier_wording_still_raised_keeps_its_reports_and_its_note():
    from vllm_errors.notes import Note, follow_rewordings
    from vllm_errors.model import Annotation

    hist = history(**{OLD: (), NEW: (OLD,)})  # both current: the old message came back beside the new one
    reports = {OLD: (report("https://github.com/o/r/issues/1"),)}
    assert along_lineage(reports, hist) == {OLD: reports[OLD]}
    notes = {OLD: Note(OLD, f"annotations/{OLD}.md", "h", Annotation(meaning="m"))}
    assert follow_rewordings(notes, hist) == notes
    gone = {**hist, OLD: replace(hist[OLD], status="removed")}
    assert set(follow_rewordings(notes, gone)) == {OLD, NEW} and along_lineage(reports, gone)[NEW] == reports[OLD]
