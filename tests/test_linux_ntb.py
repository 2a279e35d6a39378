"""Two real Linux guests joined by devlend's NTB (issue 32): each guest's NTB endpoint is a PCI
function the unmodified kernel drives with its in-tree ntb_hw_intel (an Intel Xeon gen1 NTB, the
register face devlend_devices::ntb_xeon puts on the fabric's NTB), both guests and the NTB on one
engine. ntb_tool (debugfs) brings the link up, passes a scratchpad value and a doorbell each way
and writes a memory window on one side that the other reads."""

import pytest

import devlend
from conftest import topo_path
from devlend.linux import ntb
from devlend.linux.guest import run_guests


@pytest.fixture(scope="module")
def topo():
    return devlend.load(topo_path(ntb.TOPOLOGY))


@pytest.fixture(scope="module")
def tool(topo, tmp_path_factory):
    return run_guests(topo, ntb.tool_commands(), devices=ntb.DEVICES, outdir=tmp_path_factory.mktemp("ntb-tool"), timeout_s=300)


def test_the_kernel_drives_the_ntb_with_its_own_intel_driver(tool):
    for h in ntb.HOSTS:
        console = tool[h].console.read_text(errors="replace")
        assert "NTB device registered" in console, console[-3000:]
        assert tool[h].returncodes[0] == 0 and tool[h].outputs[0].strip() == "Y", (h, tool[h].outputs[0])


def test_a_scratchpad_value_and_a_doorbell_cross_each_way(tool):
    a, b = tool["a"], tool["b"]
    assert b.returncodes[1] == 0 and b.outputs[1].strip() == "0xcafe0001", b.outputs[1]
    assert a.returncodes[1] == 0 and a.outputs[1].strip() == "0xbeef0002", a.outputs[1]
    msis = [sum(d["msis"] for d in tool[h].device["devices"]) for h in ntb.HOSTS]
    assert all(m > 0 for m in msis), msis


def test_a_memory_window_written_on_one_side_is_read_on_the_other(tool):
    a, b = tool["a"], tool["b"]
    assert a.returncodes[2] == 0 and a.outputs[2].strip() == "done", a.outputs[2]
    assert b.returncodes[2] == 0 and b.outputs[2].strip() == ntb.MW_TEXT, b.outputs[2]


def test_no_register_the_driver_used_is_unmodelled(tool):
    assert tool["a"].device["unimplemented_registers"] == [], tool["a"].device["unimplemented_registers"]
    assert tool["a"].device["simulated_ps"] == tool["b"].device["simulated_ps"]


@pytest.fixture(scope="module")
def pingpong(topo, tmp_path_factory):
    return run_guests(topo, ntb.pingpong_commands(delay_ms=1, run_s=0.2), devices=ntb.DEVICES,
                      outdir=tmp_path_factory.mktemp("ntb-pingpong"), timeout_s=300)


def test_ntb_pingpong_bounces_between_the_guests(pingpong):
    counts = {h: int(pingpong[h].outputs[0].split()[-1]) for h in ntb.HOSTS}
    assert all(pingpong[h].returncodes == [0] for h in ntb.HOSTS), {h: pingpong[h].outputs for h in ntb.HOSTS}
    # 0.2 s at a pong per 1 ms (plus the round trip), on each side: well over a hundred each, under 200.
    assert all(100 < c <= 200 for c in counts.values()), counts


@pytest.fixture(scope="module")
def netdev(topo, tmp_path_factory):
    return run_guests(topo, ntb.netdev_commands(pings=3), devices=ntb.DEVICES, outdir=tmp_path_factory.mktemp("ntb-netdev"), timeout_s=400,
                      kernel_args=ntb.TRANSPORT_BOOT)


def test_ping_crosses_ntb_netdev_both_ways(netdev):
    for h in ntb.HOSTS:
        r = netdev[h]
        assert r.returncodes[0] == 0, (h, r.outputs[0])
        assert r.returncodes[1] == 0 and "3 received" in r.outputs[1], (h, r.outputs[1])


#: Simulated times (ns) of the cable pull and its restoring, inside a's pings (they start ~0.2 s in).
PULL_NS, RESTORE_NS = 800_000_000, 1_100_000_000


@pytest.fixture(scope="module")
def cable_pulled(topo, tmp_path_factory):
    return run_guests(topo, ntb.cable_pull_commands(pings=40, interval_s=0.05), devices=ntb.DEVICES,
                      outdir=tmp_path_factory.mktemp("ntb-cable"), timeout_s=400, kernel_args=ntb.TRANSPORT_BOOT,
                      faults=[("link-down", "ntb-a", PULL_NS), ("link-up", "ntb-a", RESTORE_NS)])


def test_a_cable_pulled_under_ntb_netdev_traffic_stops_it_and_traffic_resumes(cable_pulled):
    a = cable_pulled["a"]
    seqs = ntb.replied_seqs(a.outputs[1])
    assert seqs, a.outputs[1]
    assert len(seqs) < 40, "some pings were lost while the cable was out"
    assert max(seqs) >= 35, f"replies again after the cable came back: {seqs}"
    for h in ntb.HOSTS:
        console = cable_pulled[h].console.read_text(errors="replace")
        assert console.count("qp 0: Link Up") >= 2, f"{h}: the transport's link came up again"


def test_the_linux_ntb_experiment_sets_the_guests_tools_beside_devlends_model():
    from devlend import experiments
    res = experiments.get("linux-ntb").run(quick=True)
    tool = [r for r in res.rows if r["tool"] == "ntb_tool" and r["value"] in ("ok", "FAILED")]
    assert tool and all(r["value"] == "ok" for r in tool), tool
    sides = {(r["tool"], r["side"]) for r in res.rows}
    assert ("ntb_pingpong", "linux guests") in sides and ("ntb_pingpong", "devlend model") in sides, sides
    model = next(r for r in res.rows if r["side"] == "devlend model")
    assert model["value"] > 0 and "a pong beyond the delay" in model["difference"], model
