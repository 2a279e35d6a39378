"""X1-X4 (004, Xen-IB) on the model, through the Rust bindings.

Tolerances (004 gives these statements and few numbers):
- X1: the basic split driver's round trip is much higher than the others' (at least 2 x the
  channel's 10 us more at 1 B); bypass, device domain and native are within 5% of each other;
  with one write outstanding, the basic driver at 128 KB is within 770 MB/s +-15% (655-885) and at
  least 5% below native; the others at 256 KB and above are within 830 +-5%; the device channel's
  one-way latency is at least 10 us; one outstanding stays under the bound that two unoverlapped
  channel crossings set (x1.window_arithmetic), which lies below 004's 770.
- X2: bypass 1 B RDMA round trip within 7.8 us +-10% (7.0-8.6); 256 KB RDMA throughput within
  830 +-5% (790-870); bypass equal to native (+-2%) at every size, RDMA and send/receive.
- X3: Xen adds 2-10 us to the blocking send/receive round trip (device domain and bypass guest).
- X4: the guest's registration costs more than native, and the extra grows with pages.
"""

from __future__ import annotations

import pytest

from devlend import DevlendError, XenIbError, _core

from devlend.experiments import _xenib, x1, x2, x3, x4

KiB = 1 << 10


@pytest.fixture(scope="module")
def m1():
    return x1.measure(quick=True)


def test_x1_basic_round_trip_much_higher(m1):
    lat = m1["lat"]
    assert lat["xenib-basic"][1] > lat["gen2-native"][1] + 20
    for c in ("gen2-idd", "xenib-bypass"):
        for s, v in lat[c].items():
            assert v == pytest.approx(lat["gen2-native"][s], rel=0.05)


def test_x1_throughput(m1):
    bw = m1["bw"]
    assert 655 <= bw["xenib-basic"][128 * KiB] <= 885
    assert bw["xenib-basic"][128 * KiB] <= 0.95 * bw["gen2-native"][128 * KiB]
    assert bw["xenib-basic"][4 * KiB] < 0.5 * bw["gen2-native"][4 * KiB]
    for c in ("gen2-native", "gen2-idd", "xenib-bypass"):
        assert 790 <= bw[c][256 * KiB] <= 870, c
    assert m1["channel"] >= 10.0


def test_x1_one_outstanding_is_bounded_by_two_channel_crossings(m1):
    a = x1.window_arithmetic(m1)
    assert m1["bw"]["xenib-basic"][128 * KiB] <= a["one_outstanding_max"]
    assert a["one_outstanding_max"] < 770 < a["link_bound"]
    assert a["slack_us"] < 2 * a["channel_us"]


def test_x2_latency_and_throughput():
    rtt = _xenib.rtt_us("xenib-bypass", "rdma", [1, 4 * KiB], 10)
    assert 7.0 <= rtt[1] <= 8.6
    bw = _xenib.bw_mbps("xenib-bypass", "rdma", [256 * KiB], 10)
    assert 790 <= bw[256 * KiB] <= 870
    for mode in ("rdma", "sr"):
        a = _xenib.rtt_us("xenib-bypass", mode, [1, 1 * KiB], 10)
        b = _xenib.rtt_us("gen2-native", mode, [1, 1 * KiB], 10)
        for s in a:
            assert a[s] == pytest.approx(b[s], rel=0.02)
        a = _xenib.bw_mbps("xenib-bypass", mode, [4 * KiB, 64 * KiB], 10)
        b = _xenib.bw_mbps("gen2-native", mode, [4 * KiB, 64 * KiB], 10)
        for s in a:
            assert a[s] == pytest.approx(b[s], rel=0.02)


def test_x3_blocking_adds_2_to_10_us():
    res = x3.run(quick=True)
    for r in res.rows[:-1]:
        assert 2 <= r["Xen adds (us), IDD"] <= 10
        assert 2 <= r["Xen adds (us), bypass"] <= 10


def test_x4_guest_registration_grows_with_pages():
    n = _xenib.reg_us("gen2-native", [1, 256], 2)
    g = _xenib.reg_us("xenib-bypass", [1, 256], 2)
    assert g[1] > n[1]
    assert g[256] - n[256] > g[1] - n[1]


def test_x4_device_domain_overhead_grows_to_the_papers_share():
    # 004: 25-35% at every size; devlend reaches it only for large regions (fixed part too small)
    n = _xenib.reg_us("gen2-native", [1, 256, 1024], 2)
    d = _xenib.reg_us("gen2-idd", [1, 256, 1024], 2)
    share = {p: d[p] / n[p] - 1 for p in n}
    assert 0 < share[1] < share[256] < share[1024]
    for p in (256, 1024):
        assert 0.20 <= share[p] <= 0.40, (p, share[p])


def test_experiments_produce_tables_and_plots(tmp_path):
    for mod in (x1, x2):
        res = mod.run(quick=True)
        assert res.rows and res.rows[-1][res.columns[0]] == "paper"
        res.plot(res, str(tmp_path / f"{res.name}.png"))
        assert (tmp_path / f"{res.name}.png").stat().st_size > 0
        assert res.to_csv()
    assert x4.run(quick=True).rows


def test_bad_config_is_a_clear_error():
    with pytest.raises(XenIbError, match="^configuration 'xen-nope': expected one of gen2-native, ") as e:
        _xenib.rtt_us("xen-nope", "rdma", [1], 1)
    assert e.value.kind == "unknown_name" and e.value.status is None
    with pytest.raises(XenIbError, match="^mode 'x': expected 'rdma' or 'sr'$"):
        _xenib.bw_mbps("gen2-native", "x", [1], 1, 1)


def test_testbed_topology_places_both_hcas():
    import devlend
    from devlend.experiments import topology_path
    fab = devlend.load(topology_path("xenib-back-to-back.yaml")).build()
    fab.write("server-a:cpu", "hca-a.bar2+0x10", b"\x01\x02")   # a doorbell store into the UAR BAR
    assert fab.read("server-a:cpu", "hca-a.bar2+0x10", 2) == b"\x01\x02"


@pytest.mark.parametrize("call, kind, message", [
    (lambda: _xenib.rtt_us("xenib-bypass", "rdma", [1], 0), "zero_count", "iterations must be at least 1"),
    (lambda: _xenib.rtt_us("xenib-bypass", "rdma", [0], 2), "bad_size", "message size 0: expected 1 byte to 16 MiB"),
    (lambda: _xenib.bw_mbps("xenib-bypass", "rdma", [0], 2, 1), "bad_size", "message size 0: expected 1 byte to 16 MiB"),
    (lambda: _xenib.bw_mbps("xenib-bypass", "rdma", [4096], 2, 0), "zero_count", "depth must be at least 1"),
    (lambda: _xenib.reg_us("gen2-native", [0], 1), "zero_count", "pages must be at least 1"),
])
def test_bad_benchmark_arguments_are_typed_errors_not_panics(call, kind, message):
    with pytest.raises(XenIbError) as e:
        call()
    assert (e.value.kind, str(e.value)) == (kind, message)
    assert isinstance(e.value, DevlendError)


def test_an_unbuildable_testbed_is_a_topology_error_without_json_quotes():
    with pytest.raises(XenIbError) as e:
        _xenib.call(_core.xenib_latency, '{"name": "x"}', "gen2-native", "rdma", [1], 1, False)
    assert e.value.kind == "topology" and str(e.value).startswith("the testbed does not build: ")
    assert not str(e.value).startswith('"')


# ----- beyond 004: xcmp, the RDMA-write benchmark over four access paths -----------------------
# Relations asserted (no paper values exist): bypass and VFIO equal native for large messages
# (within 1% at 256 KB); lending adds exactly its routes' extra (doorbell + two reads + one write,
# as the engine measured them) to the small-message round trip, and under 2% at 256 KB; the basic
# split driver is the worst at small messages (round trip and throughput).

from devlend.experiments import xcmp


@pytest.fixture(scope="module")
def mc():
    return xcmp.measure(quick=True)


def test_xcmp_bypass_and_vfio_equal_native_for_large_messages(mc):
    big = 256 * KiB
    for a in ("bypass", "vfio"):
        assert mc["bw"][a][big] == pytest.approx(mc["bw"]["native"][big], rel=0.01), a
        assert mc["lat"][a][64 * KiB] == pytest.approx(mc["lat"]["native"][64 * KiB], rel=0.01), a


def test_xcmp_lending_adds_the_ntb_crossings_to_small_messages(mc):
    n, l = mc["costs"]["native"], mc["costs"]["lending"]
    extra_us = ((l["doorbell_ps"] - n["doorbell_ps"]) + 2 * (l["read_rtt_ps"] - n["read_rtt_ps"]) + (l["write_ps"] - n["write_ps"])) / 1e6
    got = mc["lat"]["lending"][1] - mc["lat"]["native"][1]
    assert extra_us > 1.0
    assert got == pytest.approx(extra_us, abs=0.05)
    assert mc["bw"]["lending"][256 * KiB] == pytest.approx(mc["bw"]["native"][256 * KiB], rel=0.02)
    assert mc["costs"]["vfio"]["read_rtt_ps"] >= n["read_rtt_ps"]


def test_xcmp_basic_split_is_worst(mc):
    others = [a for a in _xenib.ACCESSES if a != "basic"]
    assert all(mc["lat"]["basic"][1] > 3 * mc["lat"][a][1] for a in others)
    assert all(mc["bw1"]["basic"][4 * KiB] < 0.5 * mc["bw1"][a][4 * KiB] for a in others)
    assert all(mc["bw"]["basic"][4 * KiB] < mc["bw"][a][4 * KiB] for a in others)


def test_xcmp_table_and_plot(tmp_path):
    res = xcmp.run(quick=True)
    assert len(res.rows) == 5 and res.to_csv()
    res.plot(res, str(tmp_path / "xcmp.png"))
    assert (tmp_path / "xcmp.png").stat().st_size > 0


def test_xcmp_bad_access_path_is_a_clear_error():
    with pytest.raises(XenIbError, match="^access path 'sr-iov': expected one of native, basic, bypass, vfio, lending$"):
        _xenib.cmp_rtt_us("sr-iov", [1], 1)
    with pytest.raises(XenIbError, match="^message size 0"):
        _xenib.cmp_bw_mbps("vfio", [0], 1, 1)


@pytest.mark.parametrize("name", ["xenib-vfio", "xenib-lending"])
def test_rust_json_copies_match_the_shipped_yaml(name):
    import json
    import os

    import devlend
    from devlend.experiments import topology_path
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "crates/devlend-experiments/tests", f"{name}.json")) as fh:
        assert json.load(fh) == json.loads(devlend.load(topology_path(f"{name}.yaml")).to_json()), f"regenerate the JSON copy of {name}"


@pytest.mark.xfail(strict=True, reason="known gap: the device domain adds 15.3% (1 page) and 15.6% (4 pages) to native's "
                                       "53.0 us: Xen's part of each of the two firmware commands' interrupts (pirq delivery 3 us + "
                                       "unmask-notify hypercall 1 us, both assumed) over a native command of ~26 us (firmware 20 us "
                                       "assumed + 5 us interrupt); 004's 25-35% would need ~6.5-9 us per interrupt or a ~11-16 us "
                                       "native command, which 004's text does not give")
def test_x4_device_domain_overhead_for_small_regions():
    n = _xenib.reg_us("gen2-native", [1, 4], 2)
    d = _xenib.reg_us("gen2-idd", [1, 4], 2)
    for p in (1, 4):
        assert d[p] / n[p] - 1 >= 0.20, p


@pytest.mark.xfail(strict=True, reason="known gap: the basic driver gives 681.6 MB/s at 128 KB with one write outstanding, "
                                       "750.3 with two and 816.2 (link-bound) with four or more (10 messages, as X1 quick runs; the HCA on the engine's "
                                       "PCI-X bus); 004's 770 is 170.2 us a message against 160.6 us of "
                                       "wire time, 9.6 us of slack, but one outstanding adds at least two channel crossings "
                                       "(2 x 10.1 us, Fig 9) the data cannot overlap (at most 724.8 MB/s) and two or more overlap "
                                       "them: 770 fits no window and 004 states none (x1.window_arithmetic)")
def test_x1_basic_peak_within_10_percent(m1):
    assert abs(m1["bw"]["xenib-basic"][128 * KiB] - 770) / 770 <= 0.10
