"""Calibration and validation (issue 16): measurements as data, probes on the model, the fit, the
textual write-back, and the verdicts.

- params/measurements.yaml loads; a malformed entry is an error naming the file and the entry;
- the fitted constants reproduce the calibration set (they were fitted to it);
- the validation set holds within its tolerances (latency 10% or 50 ns, bandwidth 10%, orderings
  exact); a measurement the model cannot reach is a strict xfail naming the mechanism and residual;
- a fit of a reduced set runs in seconds and lands on the statement; the write-back changes only
  the fitted lines;
- `devlend experiment --set`, `devlend calibrate` and `devlend validate` from the command line.
"""


import pytest
import clirun
from conftest import ROOT

from devlend import calibration
from devlend.calibration import CalibrationError, evaluate
from devlend.calibration.fit import calibrate, current_values
from devlend.calibration.tomledit import write_fitted
from devlend.calibration.validate import judge
from devlend.errors import DevlendError, TopologyError
from devlend.experiments import get

CAT = calibration.load(corpus="")     # params/measurements.yaml alone; the corpus: tests/test_corpus.py
ALL = calibration.load()
NTB = "timing.ntb_latency_ps"
B2B = "d5-ram-to-ram-back-to-back"


def cli(*args):
    return clirun.run(*args, cwd=ROOT)


def test_the_measurements_are_data_with_citations():
    assert CAT.of("calibration") and CAT.of("validation")
    for m in CAT.measurements:
        assert m.citation and m.quote and m.why
    assert {c.key for c in CAT.fitted} >= {NTB, "timing.switch_latency_ps", "cpu.intel-xeon-e5.root_latency_ps"}


BAD = [
    ("- {id: x, set: training, citation: c, quote: q, kind: value, value: 1, unit: ns, probe: ram_to_ram_ns, why: w}", "set 'training'"),
    ("- {id: x, set: validation, citation: c, quote: q, kind: value, value: 1, unit: ns, probe: guess, why: w}", "probe 'guess'"),
    ("- {id: x, set: validation, citation: c, quote: q, kind: value, probe: ram_to_ram_ns, why: w}", "missing value, unit"),
    ("- {id: x, set: calibration, citation: c, quote: q, kind: ordering, relation: '<', probe: pingpong_pair_ns, why: w}", "no residual to fit"),
    ("- {id: x, set: validation, citation: c, quote: q, probe: ram_to_ram_ns, why: w}", "missing kind"),
]


@pytest.mark.parametrize("entry, message", BAD)
def test_a_malformed_measurement_names_the_file_and_entry(tmp_path, entry, message):
    p = tmp_path / "m.yaml"
    p.write_text(f"measurements:\n  {entry}\n")
    with pytest.raises(CalibrationError) as e:
        calibration.load(str(p))
    assert e.value.where.startswith(f"{p}: measurements[0]") and message in e.value.message


def test_the_fitted_constants_reproduce_the_calibration_set():
    for m in CAT.of("calibration"):
        v = judge(m, evaluate(m))
        assert v.ok and abs(v.rel_error) < 0.03, (m.id, v.ours, m.value)


# Validation measurements the model cannot reach, each with its mechanism and its residual after
# calibration (re-measure with `devlend validate`).
XFAIL = {
    "d5-borrower-adds-a-little-under-1us": "the model's borrower crosses the NTB four times per command (doorbell, command "
        "fetch there and back, data and completion: ~1.7 us) where the paper measured a little under 1 us and expected "
        "two crossings; residual after calibration +87.7% (1690 ns; the fitted latencies shortened each crossing, the count is the gap)",
    "optane-900p-4k-read-latency": "the media latency read at face value: device.optane-900p.media_read_latency_ps is the "
        "product brief's 10 us, a figure Intel measures from the host, and the model adds its whole path on top (driver, SQ "
        "doorbell, command fetch, data, completion entry, MSI-X and the interrupt entry: 6.89 us), 16.89 us in all; the "
        "media's own share would be ~3.1 us, which needs the brief's test conditions (not retrieved) before the constant "
        "becomes fitted; residual +68.9% (16.89 us)",
}


@pytest.mark.parametrize("mid", [pytest.param(m.id, marks=pytest.mark.xfail(strict=True, reason=XFAIL[m.id])) if m.id in XFAIL else m.id
                                 for m in CAT.of("validation")])
def test_the_validation_set_holds_within_tolerance(mid):
    m = CAT.get(mid)
    v = judge(m, evaluate(m))
    assert v.ok, (mid, v.ours, m.value, v.rel_error)


def test_a_reduced_fit_lands_on_its_statement_within_bounds():
    # one constant against one statement, from a start 200 ns away: seconds, not minutes
    start = current_values([c for c in CAT.fitted if c.key == NTB])[0]
    r = calibrate(CAT, only=[NTB], fit_ids=[B2B], start={NTB: start - 200_000 if start > 200_000 else start + 150_000})
    assert len(r.values) == 1 and r.evaluations <= 40
    c = r.constants[0]
    assert c.lower <= r.values[0] <= c.upper
    assert abs(r.residuals[0]) < 0.005 or r.at_bound == [NTB]


def test_the_ntb_latency_adds_once_to_a_store_through_the_pair():
    # a path, not a component: the store crosses the pair once, so 100 ns more inside it is 100 ns more on the path
    m = CAT.get(B2B)
    base = current_values([c for c in CAT.fitted if c.key == NTB])[0]
    assert evaluate(m, {NTB: int(base) + 100_000}) - evaluate(m) == pytest.approx(100, abs=0.01)


def test_a_device_engine_issue_time_adds_once_to_its_read():
    # pcie-bench's read: the engine's issue time sits once before the request, whatever the size
    for mid in ("pcie-bench-hsw-e5-2620v3-dma_read_latency-64", "pcie-bench-hsw-e5-2620v3-dma_read_latency-2048"):
        m = ALL.get(mid)
        base = current_values([c for c in CAT.fitted if c.key == "timing.dma_issue_ps"])[0]
        assert evaluate(m, {"timing.dma_issue_ps": int(base) + 100_000}) - evaluate(m) == pytest.approx(100, abs=0.01)


def test_the_cuda_call_time_adds_once_to_a_small_copy():
    m = CAT.get("gdrcopy-cudamemcpy-overhead")
    base = current_values([c for c in CAT.fitted if c.key == "timing.cuda_call_ps"])[0]
    assert evaluate(m, {"timing.cuda_call_ps": int(base) + 1_000_000}) - evaluate(m) == pytest.approx(1000, abs=0.01)


def test_write_back_changes_only_the_fitted_lines():
    with open(calibration.HARDWARE, encoding="utf-8") as fh:
        text = fh.read()
    new = write_fitted(text, {NTB: 123000, "cpu.intel-xeon-e5.root_latency_ps": 45000}, "test set", "2030-01-02")
    old_lines, new_lines = text.split("\n"), new.split("\n")
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b]
    assert len(old_lines) == len(new_lines) and len(changed) == 2
    for i in changed:
        assert "# fitted: test set (2030-01-02); " in new_lines[i]
        assert new_lines[i].index("#") == old_lines[i].index("#")       # the comment keeps its column
        assert old_lines[i].split("; ", 1)[1] == new_lines[i].split("; ", 1)[1]   # and its note
    assert any(l.startswith("ntb_latency_ps = 123000 ") for l in new_lines)
    with pytest.raises(CalibrationError, match="no such key"):
        write_fitted(text, {"timing.no_such_ps": 1}, "s", "2030-01-02")
    with pytest.raises(CalibrationError, match="only a number"):
        write_fitted(text, {"ntb.pxh830.windows": 1}, "s", "2030-01-02")


def test_write_back_marks_a_newly_fitted_constant():
    text = "[t]\nx_ps = 5   # assumed: a guess, 5 ps\n"
    assert write_fitted(text, {"t.x_ps": 7}, "s", "2030-01-02") == "[t]\nx_ps = 7   # fitted: s (2030-01-02); a guess, 5 ps\n"


def test_experiments_take_overrides_and_name_bad_ones():
    d3 = get("d3")
    with pytest.raises(TopologyError, match="unknown constant 'ntb_latency'"):
        d3.run(quick=True, params={"timing.ntb_latency": 1})
    with pytest.raises(DevlendError, match="does not take hardware-constant overrides"):
        get("h1").run(quick=True, params={NTB: 1})


def test_cli_experiment_set(tmp_path):
    base = cli("experiment", "d3", "--csv", str(tmp_path / "a.csv"))
    more = cli("experiment", "d3", "--set", f"{NTB}=500000", "--csv", str(tmp_path / "b.csv"))
    assert base.returncode == 0 and more.returncode == 0, more.stderr
    def rt(p, name):
        return next(float(l.split(",")[1]) for l in p.read_text().splitlines() if l.startswith(name + ","))
    assert rt(tmp_path / "b.csv", "1L-P2P-SW") == rt(tmp_path / "a.csv", "1L-P2P-SW")   # no NTB on this path
    assert rt(tmp_path / "b.csv", "2L-P2P-SW") > rt(tmp_path / "a.csv", "2L-P2P-SW")
    bad = cli("experiment", "d3", "--set", "timing.ntb_latency=1")
    assert bad.returncode == 2 and "unknown constant 'ntb_latency'" in bad.stderr and "Traceback" not in bad.stderr


def test_cli_calibrate_dry_run_and_write(tmp_path):
    toml = tmp_path / "hardware.toml"
    with open(calibration.HARDWARE, encoding="utf-8") as fh:
        toml.write_text(fh.read())
    r = cli("calibrate", "--only", NTB, "--measurement", B2B)
    assert r.returncode == 0, r.stderr
    assert "cost" in r.stdout and B2B in r.stdout and "dry run" in r.stdout
    w = cli("calibrate", "--only", NTB, "--measurement", B2B, "--write", "--toml", str(toml))
    assert w.returncode == 0, w.stderr
    line = next(l for l in toml.read_text().splitlines() if l.startswith("ntb_latency_ps"))
    assert "# fitted: calibration set of params/measurements.yaml (" in line
    bad = cli("calibrate", "--only", "timing.dram_latency_ps")
    assert bad.returncode == 2 and "not fitted constants: timing.dram_latency_ps" in bad.stderr


def test_cli_validate_prints_both_sets_and_a_summary():
    r = cli("validate", "--csv", "-")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("set,id,unit,ours,theirs,error,rel_error,tolerance,ok")
    ids = {l.split(",")[1] for l in lines[1:]}
    assert ids == {m.id for m in ALL.measurements}
    s = cli("validate", "--summary", "--which", "validation")
    assert s.returncode == 0 and s.stdout.startswith("validation: ") and "within tolerance" in s.stdout


def test_readme_shows_what_validate_prints():
    import os
    import re
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    section = readme.split("## Calibration and validation", 1)[1]
    shown = re.search(r"```\n(.*?)```", section, re.S).group(1).strip()
    r = cli("validate", "--summary")
    assert r.returncode == 0 and shown == r.stdout.strip(), "update the README from `devlend validate --summary`"
