"""export-table → leaderboard needs no hidden --item-field (issue 30 item 10): export-table records the field
that holds the table's item ids beside the file it writes, and leaderboard (and calibrate) read it."""

from __future__ import annotations

import json

import pytest

from lm_eval_adaptive.cli.main import main
from lm_eval_adaptive.data.tables import item_field_file, table_item_field
from lm_eval_adaptive.errors import InputError


@pytest.fixture
def real_data():
    from lm_eval_adaptive.data.data_root import data_root

    try:
        data_root()
    except InputError as e:
        pytest.skip(f"real data not available: {e}")


def test_export_records_the_item_field_and_the_leaderboard_reads_it(real_data, tmp_path, capsys):
    table = tmp_path / "ende.csv"
    assert main(["export-table", "wmt24/en-de/bleu", "--out", str(table)]) == 0
    assert json.loads(item_field_file(table).read_text())["item_field"] == "id"
    assert table_item_field(str(table)) == "id"
    out = tmp_path / "lb.json"
    assert main(["leaderboard", "--history", str(table), "--task", "wmt24_en-de", "--metric", "bleu",
                 "--models", "GPT-4", "Aya23", "Mistral-Large", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["item_field"] == "id"  # before: null, and the task's doc ids were used
    # a file nobody recorded a field for: its ids may be anything (None); a broken record is one error
    other = tmp_path / "plain.csv"
    other.write_text(table.read_text())
    assert table_item_field(str(other)) is None
    item_field_file(other).write_text("[]")
    with pytest.raises(InputError, match="item field recorded beside the table"):
        table_item_field(str(other))
