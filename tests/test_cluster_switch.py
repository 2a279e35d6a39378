"""Issue 15's done-when: four servers behind an NTB cluster switch (MXS824 class), from a topology
file to "server 1 borrows a GPU from server 2 while server 3 reads from server 2's NVMe drive:
bandwidth and latency of each" with the documented CLI alone; lending through the switch; links
trained down to what their ends support."""

import csv
import os

import devlend
from devlend import Pool

from test_cli import cli
from conftest import MXS824_SCENARIO as SCENARIO, mxs824_scenario_run, topo_path

MXS = topo_path("four-servers-mxs824.yaml")
COPY, FIO = "gpu2-to-server1", "nvme1-randread"
# Gen3 x8: 8 GT/s per lane, 128b/130b encoding, 8 lanes (PCIe Base 3.0 §4.2.2), in GB/s.
GEN3_X8_GBPS = 8e9 * 128 / 130 * 8 / 8 / 1e9


def test_each_adapter_reaches_the_other_three_through_the_switch():
    fab = devlend.load(MXS).build()
    assert fab.peers("ntb2") == ["ntb1", "ntb3", "ntb4"]
    assert fab.trained_down == []
    out = cli("topo", MXS).stdout
    assert "ntb2 (ntb adapter)  peers ntb1 in server1 via mxs824, ntb3 in server3 via mxs824, ntb4 in server4 via mxs824" in out


def test_two_borrowers_share_the_lenders_one_adapter_and_a_return_undoes_all_of_it():
    pool = Pool(MXS).connect("server2", "server1").connect("server2", "server3").add("gpu2").add("nvme1")
    pool.available("gpu2").available("nvme1")
    pool.borrow("server1", "gpu2", dma_window="64 MiB")
    pool.borrow("server3", "nvme1", dma_window="32 MiB")
    gpu, nvme = pool.show("gpu2")["lend"], pool.show("nvme1")["lend"]
    assert gpu["lender_ntb"] == nvme["lender_ntb"] == "ntb2"
    assert (gpu["borrower_ntb"], nvme["borrower_ntb"]) == ("ntb1", "ntb3")
    assert (gpu["dma_window"]["size"], nvme["dma_window"]["size"]) == (64 << 20, 32 << 20)
    prog = pool.programmed()["ntbs"]
    assert prog["ntb2"]["translations"] >= 2 and prog["ntb1"]["translations"] >= 1 and prog["ntb3"]["translations"] >= 1
    pool.return_device("gpu2")
    assert pool.show("nvme1")["state"] == "borrowed", "the other borrower keeps its device"
    pool.return_device("nvme1")
    assert pool.idle and pool.anomalies() == []
    assert all(v["translations"] == 0 and v["lut"] == 1 for v in pool.programmed()["ntbs"].values())
    assert all(sum(h["mapped"].values()) == 0 for h in pool.programmed()["iommus"])


def _run(tmp_path, scenario: str, tag: str):
    out = tmp_path / tag
    return _read(scenario, cli("run", scenario, "--out", str(out)).stdout, out)


def _read(scenario: str, stdout: str, out):
    """`devlend run SCENARIO --out OUT`'s stdout, its workloads by name and its link rows."""
    name = open(scenario, encoding="utf-8").read().split("\nname: ", 1)[1].split("\n", 1)[0]
    rows = lambda f: list(csv.DictReader(l for l in open(os.path.join(out, f), encoding="utf-8") if not l.startswith("#")))
    return stdout, {r["name"]: r for r in rows(f"{name}.csv")}, rows(f"{name}-links.csv")


def _alone(tmp_path, keep: str) -> str:
    """The shipped scenario with only the workload `keep` (the other one's line removed)."""
    text = open(SCENARIO, encoding="utf-8").read()
    drop = FIO if keep == COPY else COPY
    lines = [l for l in text.splitlines() if f"name: {drop}," not in l]
    text = "\n".join(lines).replace("name: four-servers-mxs824-gpu-and-nvme", f"name: alone-{keep}")
    text = text.replace("topology: ../topologies/four-servers-mxs824.yaml", f"topology: {MXS}")
    p = tmp_path / f"alone-{keep}.yaml"
    p.write_text(text + "\n")
    return str(p)


def test_done_when_gpu_and_nvme_of_server2_behind_the_switch_through_the_cli(tmp_path):
    stdout, out = mxs824_scenario_run()  # `devlend run SCENARIO --out ...`, shared with test_link_stats
    stdout, both, links = _read(SCENARIO, stdout, out)
    assert "scenario four-servers-mxs824-gpu-and-nvme: workloads" in stdout and "busiest link directions" in stdout
    _, alone_copy, _ = _run(tmp_path, _alone(tmp_path, COPY), "copy")
    _, alone_fio, _ = _run(tmp_path, _alone(tmp_path, FIO), "fio")
    copy, fio = both[COPY], both[FIO]
    assert (copy["runner"], copy["device"], fio["runner"], fio["device"]) == ("server1", "gpu2", "server3", "nvme1")
    bw = lambda r: float(r["GBps"])
    assert bw(copy) < bw(alone_copy[COPY]), "the copy shares server 2's adapter link with the reads"
    assert bw(fio) < bw(alone_fio[FIO]) and float(fio["lat_mean_us"]) > float(alone_fio[FIO]["lat_mean_us"]), "the reads wait behind the copy"
    assert bw(copy) + bw(fio) < GEN3_X8_GBPS, "together within the one Gen3 x8 link"
    # Both leave server 2 through ntb2's cable towards the switch: the busiest direction there.
    header = open(os.path.join(out, "four-servers-mxs824-gpu-and-nvme.csv"), encoding="utf-8").readline()
    assert "cluster_switch_latency_ns=150" in header, "the switch's latency is among the effective parameters"
    out_of_ntb2 = [l for l in links if l["link"].startswith("ntb2.") and "mxs824" in l["link"]]
    assert out_of_ntb2 and max(float(l["utilisation"]) for l in out_of_ntb2) <= 1.0


def test_a_link_faster_than_its_ends_is_reported_trained_down(tmp_path):
    text = open(MXS, encoding="utf-8").read().replace("{a: mxs824.p1, b: ntb2.cable, gen: 3, width: 8", "{a: mxs824.p1, b: ntb2.cable, gen: 4, width: 16")
    p = tmp_path / "fast.yaml"
    p.write_text(text)
    fab = devlend.load(str(p)).build()
    (t,) = fab.trained_down
    assert t["link"] == "mxs824.p1 - ntb2.cable" and t["asked"] == (4, 16) and t["trained"] == (3, 8)
    assert "ntb2 (pxh830) (Gen3 x8)" in t["message"] and "mxs824 (mxs824) (Gen3 x16)" in t["message"], "both ends limit the generation"
    res = cli("topo", str(p))
    assert "warning: link mxs824.p1 - ntb2.cable: link asked Gen4 x16 trains to Gen3 x8" in res.stderr
