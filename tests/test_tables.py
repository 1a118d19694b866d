"""Rows of a table (Markdown cells, a boxed pane) are records of their own, whatever their width.

Rows padded to one width look like a hard wrap at that width; joined, a table of stats lines
gave only its first row's numbers (hunt5 m25: KV 7.9 % read, 97.8 % lost).
"""

import pytest
from conftest import fixture_path

from vllm_doctor import diagnose


@pytest.mark.parametrize("border", ["|", "│", "┃"])
def test_every_row_of_a_table_of_stats_lines_is_read(border):
    rows = fixture_path("m25-ascend-markdown-table-cells-v0-stats-256-running-768-pending-kv-7p9-vs-97p8.log")
    lines = rows.read_text(encoding="utf-8").replace("|", border).splitlines()
    assert len({len(x) for x in lines}) == 1  # one width: what a hard wrap looks like
    # every row read; a Markdown table's rows of two models are two series (fresh19 P3), a boxed
    # pane's rows one
    runs = [r.facts for r in diagnose(lines, name="table.md").runs if r.facts.get("stats_lines")]
    assert sum(f["stats_lines"] for f in runs) == 2 and len(runs) == (2 if border == "|" else 1)
    assert max(f["peak_kv_usage_pct"] for f in runs) == 97.8
