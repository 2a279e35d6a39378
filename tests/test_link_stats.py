"""Link statistics are over the span the workloads ran (first start to last end), never over
driver timers that fire after the work (the GPU driver's watchdog, the NVMe I/O timeout)."""

import csv
import os

import devlend

from conftest import mxs824_scenario_run, topo_path


def test_a_saturating_copys_link_reads_at_least_0_9_busy():
    s = devlend.Scenario(topo_path("three-host-cluster.yaml"))
    s.gpu_copy("copy", "borrower", "gpu0", "dtoh", 16 << 20, at_ns=2000)
    s.run()
    res, links = s.results(), s.link_stats()
    start, end = s.span_ns
    assert start == 2000 and end == res.end_ns.iloc[0]
    assert s.now_ns > 10 * end, "the watchdog's deadline moved the clock on; it is not counted"
    assert 0.9 <= links.utilisation.max() <= 1.0, links.sort_values("utilisation").tail(3)
    assert links.attrs["span_ns"] == (start, end)


def test_the_shipped_mxs824_scenario_shows_its_bottleneck_at_least_0_9_busy():
    stdout, out = mxs824_scenario_run()  # `devlend run MXS824_SCENARIO --out ...`, shared with test_cluster_switch
    with open(os.path.join(out, "four-servers-mxs824-gpu-and-nvme-links.csv"), encoding="utf-8") as fh:
        links = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    top = max(links, key=lambda l: float(l["utilisation"]))
    assert float(top["utilisation"]) >= 0.9, top
    assert top["link"].startswith("ntb2.") or "server2" in top["link"] or "gpu2" in top["link"], top["link"]
    assert "0.000" not in stdout.split("busiest link directions")[1].split("\n")[3], stdout
