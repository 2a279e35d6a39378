"""Several workloads at once (devlend.Run) and the `contention` experiment: relations the model
must keep when DMA streams share one lender's NTB link. Never the simulator's own speed.

- per-stream bandwidth falls as more streams share the link;
- the total never exceeds the bottleneck link's analytic capacity (1% slack), and from two streams
  on it is within 10% of it (the link saturates);
- a small access issued while the load runs takes longer than on the idle fabric;
- two equal streams sharing a link end together (within 2%), not one after the other;
- an unreachable address or zero bytes is one clear devlend error, never a panic.
"""


import pytest
import clirun
from conftest import ROOT, quick, topo_path

import devlend
from devlend.experiments import contention

MiB = 1 << 20


@pytest.fixture(scope="module")
def res():
    return quick("contention")


def by(res, scenario, access):
    return sorted((r for r in res.rows if r["scenario"] == scenario and r["access"] == access), key=lambda r: r["N"])


@pytest.mark.parametrize("scenario", list(contention.SCENARIOS))
@pytest.mark.parametrize("access", ["write", "read"])
def test_per_stream_bandwidth_falls_as_streams_are_added(res, scenario, access):
    # Every scenario has a shared bottleneck that one stream already fills (the NTB link, or for
    # Rem-IOMMU reads the lender root's one pool of re-split tags), so each added stream takes
    # its share from the others.
    rows = by(res, scenario, access)
    for a, b in zip(rows, rows[1:]):
        assert b["per_stream_GBps"] < a["per_stream_GBps"], (a, b)
    assert rows[-1]["per_stream_GBps"] < 0.75 * rows[0]["per_stream_GBps"]


def test_reads_through_the_re_splitting_root_share_its_tags(res):
    # One pool of tags at the lender's root for every route through it: N streams together move
    # what one stream alone moves.
    rows = by(res, "Rem-IOMMU", "read")
    for r in rows:
        assert abs(r["total_GBps"] - rows[0]["total_GBps"]) <= 0.02 * rows[0]["total_GBps"], r
        assert r["total_GBps"] < 0.5 * r["capacity_GBps"], r


@pytest.mark.parametrize("scenario", list(contention.SCENARIOS))
@pytest.mark.parametrize("access", ["write", "read"])
def test_total_never_exceeds_the_links_capacity(res, scenario, access):
    for r in by(res, scenario, access):
        assert r["total_GBps"] <= r["capacity_GBps"] * 1.01, r
        assert r["per_stream_GBps"] <= r["bound_per_stream_GBps"] * 1.01, r


@pytest.mark.parametrize("access", ["write", "read"])
def test_the_ntb_link_saturates_from_two_streams(res, access):
    # Rem-SW: nothing but the link limits the streams (Rem-IOMMU reads are limited by the root's
    # re-split requests, not the link; see the experiment's notes).
    for r in by(res, "Rem-SW", access):
        if r["N"] >= 2:
            assert r["total_GBps"] >= 0.9 * r["capacity_GBps"], r


@pytest.mark.parametrize("scenario", list(contention.SCENARIOS))
@pytest.mark.parametrize("access", ["write", "read"])
def test_a_small_access_waits_longer_under_load(res, scenario, access):
    # The probe queues behind the load at the shared bottleneck (link or root tags).
    for r in by(res, scenario, access):
        assert r["probe_loaded_ns"] > r["probe_idle_ns"], r


def test_effective_parameters_are_stated(res):
    text = " ".join(res.notes)
    for word in ("MPS", "MRRS", "read tags", "Gen3 x8"):
        assert word in text


@pytest.fixture
def fab():
    return devlend.load(topo_path("pxh830-two-host.yaml")).build()


def test_two_streams_sharing_a_link_finish_together_not_back_to_back(fab):
    alone = fab.machine()
    alone.stream("a", "gpu0", "ntb-l.mw1", 8 * MiB)
    one = alone.run().results().end_ns.iloc[0]
    run = devlend.Run(fab)
    run.stream("a", "gpu0", "ntb-l.mw1", 8 * MiB)
    run.stream("b", "gpu0", "ntb-l.mw1+0x1000000", 8 * MiB)
    df = run.run().results()
    a, b = df.end_ns
    assert abs(a - b) / max(a, b) < 0.02
    assert 1.8 < max(a, b) / one < 2.2
    links = run.link_stats()
    assert links.payload.max() == 16 * MiB
    assert (links.utilisation <= 1.0).all() and links.utilisation.max() > 0.9
    assert set(df.columns) >= {"name", "requester", "addr", "bytes", "start_ns", "end_ns", "GBps"}
    assert " -> " in links.link.iloc[0]


def test_an_unreachable_address_is_one_clear_devlend_error(fab):
    run = fab.machine()
    with pytest.raises(devlend.WorkloadError) as e:
        run.stream("lost", "gpu0", 0xdead_0000_0000, MiB)
    assert e.value.kind == "unreachable" and e.value.failure is not None
    assert str(e.value).startswith("workload lost: 0xdead00000000 cannot be reached")
    with pytest.raises(devlend.WorkloadError, match="zero bytes"):
        run.stream("empty", "gpu0", "ntb-l.mw1", 0)
    with pytest.raises(devlend.FabricError):
        run.stream("who", "nobody", "ntb-l.mw1", MiB)


def cli(*args):
    return clirun.run(*args, cwd=ROOT)


def test_run_streams_command_prints_a_table_and_writes_csv(tmp_path):
    out = tmp_path / "streams.csv"
    r = cli("run-streams", topo_path("pxh830-two-host.yaml"), "--stream", "a:gpu0:ntb-l.mw1:1MiB",
            "--stream", "b:lender:gpu0:ntb-l.mw1+0x1000000:1MiB:read@100", "--csv", str(out))
    assert r.returncode == 0, r.stderr
    assert "GBps" in r.stdout and "utilisation" in r.stdout and "ntb-l" in r.stdout
    header, a, b, made = out.read_text().splitlines()
    assert made.startswith("# devlend provenance: {")
    assert header.startswith("name,requester,") and a.startswith("a,gpu0,") and b.startswith("b,lender:gpu0,")
    bad = cli("run-streams", topo_path("pxh830-two-host.yaml"), "--stream", "x:gpu0:0xdead00000000:1MiB")
    assert bad.returncode == 2 and "cannot be reached" in bad.stderr and bad.stdout == ""
