"""compose (issue 14): fio on a borrowed drive, a VM's GPU copy and the hyper-tenant NIC on one
fabric and one clock; and the NIC workload itself (devlend-workloads' `nic`)."""

import pytest

import devlend
from devlend.experiments import compose


@pytest.fixture(scope="module")
def quick():
    return compose.cases(quick=True)


def _row(rows, workload):
    return next(r for r in rows if r["workload"] == workload)


def test_contention_lowers_each_workloads_throughput(quick):
    for config in compose.CONFIGS:
        together, _ = quick["together", "all", config]
        for w in compose.WORKLOADS:
            alone, _ = quick["alone", w, config if w == "nic" else "-"]
            assert _row(together, w)["GBps"] < _row(alone, w)["GBps"], (config, w)
        # Sharing the link lengthens the NIC's translation round trips and the fio job's I/Os.
        nic_alone, _ = quick["alone", "nic", config]
        fio_alone, _ = quick["alone", "fio", "-"]
        assert _row(together, "nic")["latency_us"] > _row(nic_alone, "nic")["latency_us"]
        assert _row(together, "fio")["latency_us"] > _row(fio_alone, "fio")["latency_us"]


def test_totals_respect_the_bottleneck(quick):
    for config in compose.CONFIGS:
        _, link = quick["together", "all", config]
        # The link every workload crosses: out of the lender towards its one NTB adapter.
        assert link["link"].startswith("lender.rp3 -> ntb-l"), link
        assert link["capacity_gbps"] == pytest.approx(8 * 8 * 128 / 130)
        assert link["link_gbps"] <= link["capacity_gbps"]
        assert link["total_gbps"] <= link["capacity_gbps"]
        assert 0 < link["utilisation"] <= 1


def test_hypertrio_gives_the_nic_more_than_base_at_256_tenants(quick):
    for case, key in (("alone", "nic"), ("together", "all")):
        on, _ = quick[case, key, "hypertrio"]
        off, _ = quick[case, key, "base"]
        assert _row(on, "nic")["GBps"] > _row(off, "nic")["GBps"], case


def test_the_nic_feeds_its_loaded_round_trip_back():
    s = devlend.Scenario(devlend.load(compose.topology_path(compose.TOPOLOGY)))
    s.nic("nic", "borrower", "nic0", config="base", tenants=64, duration_ns=60_000, packets_per_tenant=100)
    s.run()
    n = s.nic_results()["nic"]
    assert n["iterations"] >= 1 and n["packets"] > 0 and n["translations"] > 0
    # The pipeline last ran with a round trip the requests saw on this run (within the 1% it tolerates).
    assert n["converged_at_ns"] is not None
    last = [e["round_trip_ns"] for e in n["epochs"] if e["round_trip_ns"] is not None][-1]
    assert abs(last - n["model_round_trip_ns"]) < 0.02 * n["model_round_trip_ns"]
    # Its round trip crosses the NTB twice: longer than the probe's would be on 002's 900 ns alone.
    assert n["round_trip_ns"] > 0


def test_nic_bad_input_is_typed():
    s = devlend.Scenario(devlend.load(compose.topology_path(compose.TOPOLOGY)))
    with pytest.raises(devlend.errors.WorkloadError, match="configuration 'fast'"):
        s.nic("n", "borrower", "nic0", config="fast", tenants=4, duration_ns=1000)
    with pytest.raises(devlend.errors.WorkloadError, match="not a nic device"):
        s.nic("n", "borrower", "nvme0", config="base", tenants=4, duration_ns=1000)


def test_the_scenario_file_runs(tmp_path):
    from devlend.scenario_file import load
    import pathlib
    path = pathlib.Path(devlend.__file__).parent / "scenarios" / "compose-nic-fio-vm-gpu.yaml"
    run = load(str(path)).run()
    res = run.results().set_index("name")
    assert set(res.index) == {"fio", "gpu", "nic"}
    assert (res["GBps"] > 0).all()


def test_hnic_feeds_the_loaded_round_trip_back_until_it_holds():
    from devlend.experiments import hnic
    rtt = hnic.path_costs()["round_trip_ps"]["lent"]
    share = hnic.coupled("hypertrio", 1024, rtt)
    nic, both = share["nic"], share["together"]
    assert nic["converged"] and both["converged"]
    # The pipeline ran with what its requests saw: longer than idle, longest next to the GPU copy.
    assert rtt / 1000 < nic["model_round_trip_ns"] < both["model_round_trip_ns"]
    assert both["model_gbps"] < nic["model_gbps"]
    assert both["nic_gbps"] < nic["nic_gbps"] and both["gpu_gbps"] < share["gpu"]["gpu_gbps"]
    assert both["link_gbps"] <= share["link_capacity_gbps"]
