"""Rust tests and benchmarks read JSON copies of shipped topologies; keep them equal to the YAML."""

import json
import os

import pytest

import devlend

from conftest import ROOT, topo_path

FIXTURES = [
    ("crates/devlend-bench/three-host.json", "three-host-cluster.yaml", False),
    ("crates/devlend-engine/tests/pxh830.json", "pxh830-two-host.yaml", True),
    ("crates/devlend-drivers/tests/b2b.json", "nvme-back-to-back.yaml", False),
    ("crates/devlend-drivers/tests/pxh830-two-host.json", "pxh830-two-host.yaml", True),
    ("crates/devlend-drivers/tests/three-host-cluster.json", "three-host-cluster.yaml", False),
    ("crates/devlend-rdma/tests/pex8749-rdma.json", "pex8749-rdma.yaml", True),
    ("crates/devlend-vm/tests/expansion-chassis-vm.json", "expansion-chassis-vm.yaml", True),
]


@pytest.mark.parametrize("fixture,yaml_name,drop_setup", FIXTURES)
def test_json_fixture_matches_the_shipped_yaml(fixture, yaml_name, drop_setup):
    topo = devlend.load(topo_path(yaml_name))
    if drop_setup:
        topo.setup = []
    with open(os.path.join(ROOT, fixture)) as fh:
        assert json.load(fh) == json.loads(topo.to_json()), f"regenerate {fixture} from {yaml_name}"
