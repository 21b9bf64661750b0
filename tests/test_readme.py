"""The README is a landing page whose generated answer is the tables'; the ledger's example
(``docs/ledger.md``, the block tagged ``ledger-example``) runs as written."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
LEDGER_DOC = README.parent / "docs" / "ledger.md"  # where the ledger's runnable example lives
LANDING_MAX_LINES = 150
LIBRARY_DEPRECATION = "is_gradient_checkpointing"  # read by TRL and PEFT, not by the example


def _ledger_example() -> str:
    text = LEDGER_DOC.read_text()
    match = re.search(r"<!-- ledger-example[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert match, "docs/ledger.md lost its ledger example (the block tagged <!-- ledger-example ... -->)"
    return match.group(1)


def test_readme_ledger_example_runs(tmp_path, monkeypatch, capsys):
    code = _ledger_example()
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(code, str(LEDGER_DOC), "exec"), {"__name__": "__readme__"})
    printed = capsys.readouterr().out
    assert "'C_search'" in printed and "'rho'" in printed
    assert (tmp_path / "out" / "ledger.jsonl").read_text().count("\n") == 2
    # nothing the example sets is deprecated; TRL 1.16 and PEFT 0.21 read transformers' deprecated
    # `is_gradient_checkpointing` themselves, whatever a run sets (docs/ledger.md says so)
    deprecated = {str(w.message).split("`")[1] for w in caught if issubclass(w.category, FutureWarning)}
    assert deprecated <= {LIBRARY_DEPRECATION}


def test_the_readme_summary_and_results_md_are_generated_from_the_committed_tables():
    """README.md's one generated block (the plain answer) and the whole of RESULTS.md are what
    ``paper-repro report`` writes from the committed tables today."""
    from paper_repro.analysis.report import readme as report
    from paper_repro.common.paths import repo_root

    readme = (repo_root() / "README.md").read_text()
    if not (repo_root() / "data/results/cpu-tiny/claims.csv").exists():
        pytest.skip("no committed claims table yet")
    start, end = report.SUMMARY_START, report.SUMMARY_END
    block = readme[readme.index(start) : readme.index(end) + len(end)]
    stale = "stale: paper-repro report"
    assert block == report.summary_block("cpu-tiny"), f"README's summary is {stale}"
    results = (repo_root() / report.RESULTS).read_text()
    assert results == report.results_markdown("cpu-tiny"), f"{report.RESULTS} is {stale}"


def test_the_summary_links_to_results_md_and_the_glossary_never_to_a_readme_anchor():
    from paper_repro.analysis.report import readme as report

    block = report.summary_block("cpu-tiny")
    assert f"]({report.RESULTS}#the-answer-in-detail)" in block and f"]({report.GLOSSARY})" in block
    assert "](#" not in block, "the summary links to a README anchor the landing page may not have"
    results = report.results_markdown("cpu-tiny")
    assert results.startswith("# Results") and report.COMMAND in results.split("\n## ")[0]
    for heading in ("## The answer in detail", "## Every claim", "## The study in numbers"):
        assert heading in results


def test_the_readme_needs_only_its_summary_markers(tmp_path):
    """A landing page that holds only the summary block is updated; RESULTS.md is written beside it."""
    from paper_repro.analysis.report import readme as report
    from paper_repro.common.paths import repo_root

    (tmp_path / "README.md").write_text(
        f"# landing\n\n{report.SUMMARY_START}\nold\n{report.SUMMARY_END}\n\nprose\n"
    )
    (tmp_path / "data/results").mkdir(parents=True)
    (tmp_path / "data/results/cpu-tiny").symlink_to(repo_root() / "data/results/cpu-tiny")
    assert report.update_readme("cpu-tiny", tmp_path)
    text = (tmp_path / "README.md").read_text()
    assert "\nold\n" not in text and text.endswith("\n\nprose\n")
    assert (tmp_path / report.RESULTS).read_text() == report.results_markdown("cpu-tiny", tmp_path)
    assert not report.update_readme("cpu-tiny", tmp_path)  # current: nothing rewritten


def test_the_committed_study_is_the_code_as_it_stands():
    """Every run the cpu-tiny study asks for (stages A, B, D at the full budget with the profile's
    seeds; RACE pilots and TRL's default cells) has an ok row in the committed runs.csv: the
    committed tables were made by these checkpoints and this spec code, or the study must rerun."""
    from paper_repro.common.results import RUN_COLUMNS, ResultTable, results_dir
    from paper_repro.config import load_profile
    from paper_repro.drivers import dryrun
    from paper_repro.run import runner

    profile = load_profile("cpu-tiny")
    table = ResultTable(results_dir("cpu-tiny") / "runs.csv", RUN_COLUMNS)
    done = {r["run_id"] for r in table.rows() if r["status"] == "ok"}
    specs = [s for stage in dryrun.study_specs(profile).values() for s in stage]
    missing = sorted(
        {
            f"{s.stage}/{s.setting}/{s.cell}/{s.budget_kind}/seed{s.seed}"
            for s in specs
            if s.run_id not in done
        }
    )
    assert not missing, (
        f"{len(missing)} runs are not in the committed table, e.g. {missing[:3]}: run `make reproduce`"
    )
    unmeasured = runner.pending(specs)
    assert not unmeasured, f"{len(unmeasured)} runs lack the points of their ladder in curves.csv"


def test_the_readme_is_a_landing_page_a_reader_can_finish():
    """At most 150 lines: what this is, the answer (generated), the words, the two commands, what
    each folder holds and where to read more, in that order; no generated block but the answer."""
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= LANDING_MAX_LINES, (
        f"README.md is {len(lines)} lines (at most {LANDING_MAX_LINES}): move usage to docs/, results to RESULTS.md"
    )
    order = [
        "## What we found",
        "## Words we use",
        "## The two commands",
        "## What each folder holds",
        "## Read more",
    ]
    found = [text.find(h) for h in order]
    assert -1 not in found and found == sorted(found), f"README's sections must be, in order: {order}"
    assert text.index("<!-- summary:end -->") < text.index("## Words we use"), "the answer comes first"
    blocks = re.findall(r"<!-- ([\w-]+):start -->", text)
    assert blocks == ["summary"], (
        f"README holds generated blocks other than the answer: {blocks} (RESULTS.md's)"
    )
    assert "<!-- fact:" not in text, "README states a study number; the numbers are RESULTS.md's"
    for target in (
        "make reproduce",
        "make test",
        "docs/glossary.md",
        "docs/usage.md",
        "RESULTS.md",
        "docs/layout.md",
    ):
        assert target in text, f"README does not point to {target}"


def test_design_csvs_post_hoc_block_has_the_noise_the_committed_runs_show():
    """``design.csv``'s post-hoc block was simulated with the seed SDs, REML recipe SD and frontier
    height the committed runs show (the analysis regenerates it; a stale block quotes another
    study's noise)."""
    import pandas as pd

    from paper_repro.analysis import design
    from paper_repro.analysis.claims import Classes
    from paper_repro.analysis.pipeline import _checked_runs
    from paper_repro.analysis.tables.frontiers import at_full_budget, load_curves, shared_runs, study_rows
    from paper_repro.common.results import results_dir
    from paper_repro.config import load_profile

    profile = load_profile("cpu-tiny")
    root = results_dir("cpu-tiny")
    table = pd.read_csv(root / "design.csv")
    post = table[table["block"] == "post-hoc"] if "block" in table else table.iloc[0:0]
    assert len(post), "design.csv has no post-hoc block: python -m paper_repro analyse (make reproduce)"
    runs = _checked_runs(root / "runs.csv", profile)
    runs = at_full_budget(runs, load_curves(root / "curves.csv", runs), profile.budget_flops)
    grid = study_rows(profile, runs)["grid"]
    classes = Classes.of(profile, shared_runs(grid, [s.name for s in profile.all_settings()]))
    model = design.noise_model(grid[grid["setting"].isin(classes.distinct)], classes.distinct)
    for column, value in (("recipe_sd", model.noise.recipe_sd), ("seed_sd_median", model.noise.default),
                          ("amplitude", model.amplitude)):  # fmt: skip
        assert post[column].to_numpy(float) == pytest.approx(value, rel=1e-6), column
