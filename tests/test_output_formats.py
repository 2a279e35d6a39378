"""--format csv|json prints only data on stdout; the table and notes stay in table form."""

import csv
import io
import json

import clirun
from conftest import ROOT


def cli(*args):
    return clirun.run(*args, cwd=ROOT)


def test_experiment_json_and_csv_are_data_alone(tmp_path):
    j = cli("experiment", "hops", "--format", "json", "--csv", str(tmp_path / "h.csv"))
    doc = json.loads(j.stdout)                                     # nothing else on stdout
    assert doc["name"] == "hops" and any(r["scenario"] == "NatRem-RAM-IOMMU" and r["devlend_hops"] == 21 for r in doc["rows"])
    assert f"wrote {tmp_path / 'h.csv'}" in j.stderr
    c = cli("experiment", "hops", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(c.stdout)))
    assert rows[0]["scenario"] and "note:" not in c.stdout and "┃" not in c.stdout
    bad = cli("experiment", "hops", "--format", "yaml")
    assert bad.returncode == 2 and "expected one of table, csv, json" in bad.stderr
