"""The final report: numbers rounded for people, the paper's value beside ours, a table that fits
the terminal, and summary.md's relative links."""

import io
import math

from geomopt.report import ReportEntry, format_number, key_rows, render_markdown, render_table


def test_numbers_round_zero_and_explain_nan():
    assert format_number(-9.8e-16) == "0"  # a slope fitted to constant values
    assert format_number(1.994e-10) == "1.994e-10"  # a real small residual stays
    assert format_number(0.123456) == "0.1235" and format_number(7) == "7"
    assert format_number(math.nan) == "nan"
    assert format_number(math.nan, "one d: no slope to fit") == "nan (one d: no slope to fit)"
    assert format_number(math.inf) == "inf"


def _entry(**kw):
    base = dict(name="gfm/paths", preset="quick", status="ran", seconds=199.2,
                headline={"torus/gfm": 0.0371, "torus/stein": 0.187, "torus/rbf": 0.048,
                          "slope": -9.8e-16, "gap": math.nan, "extra": 1.0},
                key_numbers=("torus/gfm", "slope", "gap"), paper={"torus/stein": 0.326},
                nan_reasons={"gap": "one d"})  # fmt: skip
    base.update(kw)
    return ReportEntry(**base)


def test_key_rows_show_key_numbers_then_paper_keys():
    rows = key_rows(_entry())
    assert rows == [
        ("torus/gfm", "0.0371", ""),
        ("slope", "0", ""),
        ("gap", "nan (one d)", ""),
        ("torus/stein", "0.187", "0.326"),
    ]
    assert [r[0] for r in key_rows(_entry(), all_keys=True)][-2:] == ["torus/rbf", "extra"]
    assert [r[0] for r in key_rows(_entry(key_numbers=(), paper={}))] == [
        "torus/gfm", "torus/stein", "torus/rbf", "slope"
    ]  # fmt: skip


def test_table_fits_a_narrow_terminal():
    buf = io.StringIO()
    long = _entry(name="canon/curve_regularity_with_a_long_name",
                  headline={"curve/hilbert/d10/median_of_pairs": 0.1, "x": 1.0})  # fmt: skip
    render_table([_entry(), long, ReportEntry("x/y", "quick", "FAILED", None, error="boom")],
                 width=72, file=buf)  # fmt: skip
    lines = buf.getvalue().splitlines()
    assert lines and max(len(line) for line in lines) <= 72
    text = buf.getvalue()
    assert "0.326" in text and "FAILED" in text and "3:19" in text


def test_summary_markdown_links_are_relative(tmp_path):
    out = tmp_path / "results"
    run = out / "gfm" / "paths" / "quick"
    fig = out / "figures" / "gfm" / "gfm_paths_distance.png"
    md = render_markdown([_entry(path=run, figures=[fig])], preset="quick", root=out,
                         commit="abc123", total_seconds=200.0)  # fmt: skip
    assert "- commit: abc123" in md and "- date: " in md and "- machine: " in md
    assert "[gfm/paths/quick](gfm/paths/quick/)" in md
    assert "(figures/gfm/gfm_paths_distance.png)" in md and str(tmp_path) not in md
    assert "| `torus/stein` | 0.187 | 0.326 |" in md
    assert max(len(line) for line in md.splitlines()) <= 100
