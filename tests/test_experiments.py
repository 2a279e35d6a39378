"""Experiment tolerance tests: the reproduced figures land within stated tolerances of the papers.

D1 (000 §7.1, Fig 10; 001 §7.1) states relations, not numbers, plus 001 §7.3.1's "a little under
6 GB/s" for reads that do not cross a root. Tolerances:
- "reduced, especially for reads": Rem-IOMMU reads below half of Rem-SW reads at >= 1 MiB, and the
  read ratio at least 0.3 below the write ratio; writes never faster with the IOMMU.
- "Loc slightly faster for small transfers": Loc at least 20% above Rem-SW at 4 KiB.
- "curves converge from 1 MB": Loc and Rem-SW within 5% at 1 MiB and above.
- "a little under 6 GB/s": Rem-SW and Loc reads at 4 MiB in [5.0, 6.0) GB/s.
"""

import pytest

from devlend.experiments import bandwidth

MiB = 1 << 20


@pytest.fixture(scope="module")
def d1():
    res = bandwidth.run(quick=True)
    return {(r["scenario"], r["size"]): r for r in res.rows}


def test_d1_iommu_path_hurts_reads_much_more_than_writes(d1):
    for size in (1 * MiB, 4 * MiB):
        sw, io = d1["Rem-SW", size], d1["Rem-IOMMU", size]
        read_ratio = io["read_GBps"] / sw["read_GBps"]
        write_ratio = io["write_GBps"] / sw["write_GBps"]
        assert read_ratio < 0.5
        assert write_ratio - read_ratio >= 0.3
    for (scenario, size), r in d1.items():
        if scenario == "Rem-IOMMU":
            assert r["write_GBps"] <= d1["Rem-SW", size]["write_GBps"]


def test_d1_local_is_faster_for_small_transfers_and_converges_from_1mb(d1):
    for key in ("write_GBps", "read_GBps"):
        assert d1["Loc", 4096][key] >= 1.2 * d1["Rem-SW", 4096][key]
        for size in (1 * MiB, 4 * MiB):
            loc, rem = d1["Loc", size][key], d1["Rem-SW", size][key]
            assert abs(loc - rem) / loc < 0.05, (key, size, loc, rem)


def test_d1_reads_that_do_not_cross_a_root_reach_a_little_under_6_gbps(d1):
    for scenario in ("Loc", "Rem-SW"):
        assert 5.0 <= d1[scenario, 4 * MiB]["read_GBps"] < 6.0


def test_d1_plot_is_written(tmp_path):
    res = bandwidth.run(quick=True)
    png = tmp_path / "d1.png"
    res.plot(res, str(png))
    assert png.stat().st_size > 10_000
