"""devlend.Pool: smartio_tool's verbs on any topology, topology borrow/return operations, and
`devlend pool`. Every failed borrow and every return leaves nothing mapped."""

import json

import pytest

import devlend
from devlend import Pool, PoolError, TopologyError

from test_cli import cli
from conftest import topo_path

FOUR = topo_path("four-server-cluster.yaml")


def lending_programming(pool: Pool) -> dict:
    """What Device Lending programs, from the fabric's inventory: NTB translations, requester-ID
    LUT entries, bytes mapped in IOMMU domains."""
    inv = pool.inventory()
    ntbs, mapped = {}, {}

    def walk(node):
        if node.get("kind") == "ntb":
            ntbs[node["component"]] = (node["inbound"], node["rid_lut"])
        for c in node.get("children", []):
            walk(c)
    for h in inv["hosts"]:
        walk(h["tree"])
        mapped[h["name"]] = sum(d["mapped_bytes"] for d in h["iommu_domains"])
    return {"ntbs": ntbs, "iommu_mapped": mapped}


def offered(dev: str, lender: str, borrower: str, path: str = FOUR) -> Pool:
    return Pool(path).connect(lender, borrower).add(dev).available(dev)


def test_fabric_device_ids_name_node_and_place():
    df = Pool(FOUR).list()
    assert list(df.fdid[:3]) == ["40000", "40001", "40002"], "server1 is node 4: gpu0, gpu1, nvme0"
    assert list(df.device[3:6]) == ["gpu2", "gpu3", "nvme1"] and df.fdid[3] == "80000"
    assert len(df) == 12 and set(df.state) == {"not added"}, "NTB adapters are not lendable"


def test_borrow_and_return_by_fdid_leave_the_fabric_as_it_was():
    pool = offered("gpu2", "server2", "server1")
    before = lending_programming(pool)
    pool.borrow("server1", "80000", dma_window="64 MiB")
    shown = pool.show("gpu2")
    assert shown["state"] == "borrowed" and shown["borrower"] == "server1"
    assert shown["lend"]["lender_ntb"] == "ntb-2-1" and shown["lend"]["borrower_ntb"] == "ntb-1-2"
    assert shown["lend"]["dma_window"]["size"] == 64 << 20 and len(shown["lend"]["bars"]) == 3
    assert lending_programming(pool) != before and not pool.idle
    pool.return_device("gpu2")
    assert pool.idle and lending_programming(pool)["ntbs"] == before["ntbs"]
    assert all(v == 0 for v in lending_programming(pool)["iommu_mapped"].values())
    assert pool.show("gpu2")["state"] == "available" and pool.anomalies() == []


@pytest.mark.parametrize("setup, verb, kind", [
    (lambda p: p, lambda p: p.borrow("server1", "gpu9"), "no-such-device"),
    (lambda p: p, lambda p: p.borrow("server1", "gpu2"), "not-in-pool"),
    (lambda p: p.add("gpu2"), lambda p: p.borrow("server1", "gpu2"), "unavailable"),
    (lambda p: p.add("gpu2").available("gpu2"), lambda p: p.borrow("server1", "gpu2"), "not-connected"),
    (lambda p: p.connect("server2", "server1").add("gpu2").available("gpu2").borrow("server1", "gpu2"),
     lambda p: p.borrow("server1", "gpu2"), "borrowed"),
    (lambda p: p.connect("server2", "server1").add("gpu2").available("gpu2"),
     lambda p: p.borrow("server1", "gpu2", dma_window="4 GiB"), "window-too-large"),
    (lambda p: p, lambda p: p.return_device("gpu2"), "not-borrowed"),
    (lambda p: p, lambda p: p.add("ntb-1-2"), "not-lendable"),
])
def test_bad_pool_verbs_are_typed_errors_and_map_nothing(setup, verb, kind):
    pool = setup(Pool(FOUR))
    before = lending_programming(pool)
    with pytest.raises(PoolError) as e:
        verb(pool)
    assert e.value.kind == kind, str(e.value)
    assert lending_programming(pool) == before


def test_unreachable_lender_is_refused():
    # The four-server mesh without the cable between server 1 and server 2.
    topo = devlend.load(FOUR)
    topo.links = [ln for ln in topo.links if not (ln.a == "ntb-1-2.cable")]
    with pytest.raises(PoolError, match="no NTB joins") as e:
        Pool(topo).connect("server2", "server1")
    assert e.value.kind == "unreachable"


def test_the_dma_window_message_names_the_ntb_limit():
    pool = offered("gpu2", "server2", "server1")
    with pytest.raises(PoolError, match="larger than the NTB can map"):
        pool.borrow("server1", "gpu2", dma_window="4 GiB")
    assert pool.idle


def write(tmp_path, text: str) -> str:
    p = tmp_path / "t.yaml"
    base = open(FOUR).read()
    p.write_text(base + "setup:\n" + text)
    return str(p)


def test_topology_borrow_operations_lend_without_hand_written_windows(tmp_path):
    path = write(tmp_path, "  - {op: borrow, borrower: server1, device: gpu2, dma_window: 32 MiB}\n"
                           "  - {op: borrow, borrower: server3, device: nvme1}\n"
                           "  - {op: return, device: nvme1}\n")
    pool = Pool(path)
    df = pool.list().set_index("device")
    assert df.loc["gpu2", "state"] == "borrowed" and df.loc["nvme1", "state"] == "available"
    assert pool.show("gpu2")["lend"]["dma_window"]["size"] == 32 << 20
    with pytest.raises(TopologyError, match="devlend.Pool"):
        devlend.load(path).build()


@pytest.mark.parametrize("ops, line, field, match", [
    ("  - {op: borrow, borrower: server1, device: gpu99}\n", 1, "setup[0].device", "no device"),
    ("  - {op: borrow, borrower: server1, device: gpu2}\n  - {op: borrow, borrower: server3, device: gpu2}\n", 2, "setup[1].device", "borrowed by server1"),
    ("  - {op: borrow, borrower: server1, device: gpu2, dma_window: 8 GiB}\n", 1, "setup[0].dma_window", "larger than the NTB can map"),
    ("  - {op: return, device: gpu2}\n", 1, "setup[0].device", "not borrowed"),
    ("  - {op: borrow, borrower: server1, device: gpu2, window: 1}\n", 1, "setup[0].window", "unknown key 'window': expected one of op, borrower, device, dma_window"),
    ("  - {op: borrow, borrower: server1, device: gpu2}\n  - {op: bus_master, device: gpu0}\n", 2, "setup[1].op", "before any borrow"),
])
def test_bad_topology_operations_name_file_line_and_field(tmp_path, ops, line, field, match):
    path = write(tmp_path, ops)
    with pytest.raises(TopologyError) as e:
        Pool(path)
    err = e.value
    base_lines = open(FOUR).read().count("\n") + 1
    assert (err.file, err.line - base_lines, err.field) == (path, line, field), str(err)
    assert match in err.message, str(err)


def test_cli_pool_applies_verbs_and_prints_the_table():
    verbs = ["connect", "server2", "server1", "add", "gpu2", "available", "gpu2", "borrow", "server1", "80000", "64MiB", "show", "gpu2"]
    out = cli("pool", FOUR, *verbs).stdout
    assert "borrower_ntb: ntb-1-2" in out and "size: 67108864" in out and "{" not in out   # no JSON in the table
    assert "device pool of four-server-cluster" in out and "borrowed" in out
    doc = json.loads(cli("pool", FOUR, "--reset", "--format", "json", *verbs).stdout)
    assert doc["details"][0]["lend"]["borrower_ntb"] == "ntb-1-2" and doc["pool"][0]["state"]


@pytest.mark.parametrize("args, expect", [
    (["borrow", "server1", "gpu2"], "pool borrow server1 gpu2: gpu2 is not in the pool"),
    (["fly", "gpu2"], "unknown verb 'fly'"),
    (["add"], "pool add: expected 1 argument, got 0"),
    (["connect", "server2", "server1", "add", "gpu2", "available", "gpu2", "borrow", "server1", "gpu2", "9GiB"], "larger than the NTB can map"),
])
def test_cli_pool_bad_input_is_one_clear_error(args, expect):
    res = cli("pool", FOUR, *args, check=False)
    assert res.returncode == 2 and expect in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_return_across_a_down_link_completes_and_reports_what_it_could_not_reach():
    pool = offered("gpu2", "server2", "server1")
    before = lending_programming(pool)
    pool.borrow("server1", "gpu2").return_device("gpu2")
    assert pool.unreached == []
    pool.borrow("server1", "gpu2").link_down("ntb-2-1").return_device("gpu2")
    assert pool.unreached == [{"device": "gpu2", "lender": "server2", "borrower": "server1", "ntb": "ntb-2-1"}]
    assert pool.idle and lending_programming(pool)["ntbs"] == before["ntbs"] and pool.anomalies() == []
    pool.link_up("ntb-2-1").borrow("server1", "gpu2")
    assert pool.show("gpu2")["state"] == "borrowed"
