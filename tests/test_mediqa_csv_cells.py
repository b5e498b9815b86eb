"""A MEDIQA-CORR CSV with a cell over Python's csv field limit (131,072 characters): one error line that names the
row, never a bare "field larger than field limit" without saying where."""

import csv

import pytest

from tasks.mediqa_corr.data import MediqaDataError, load_notes
from tests.cli import dispatch_run

pytestmark = pytest.mark.unit


def write_notes(path, big_row: int) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["Text ID", "Text", "Sentences"])
        for k in range(1, 4):
            text = "x" * 1_000_000 if k == big_row else f"Note {k}."
            writer.writerow([f"n{k}", text, f"0 Note {k}.\n1 It is fine."])


def test_a_one_megabyte_cell_names_its_row(tmp_path):
    path = tmp_path / "big.csv"
    write_notes(path, big_row=2)  # the header is row 1, n1 row 2, n2 (the big one) row 3
    with pytest.raises(MediqaDataError, match=r"big\.csv, row 3: malformed CSV \(field larger than field limit"):
        load_notes(path)


def test_the_run_refuses_it_in_one_line(tmp_path):
    path = tmp_path / "big.csv"
    write_notes(path, big_row=3)
    proc = dispatch_run("program=mediqa_corr", f"data.path={path}", f"hydra.run.dir={tmp_path / 'run'}", quiet=True)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}, row 4: malformed CSV"), proc.stderr
