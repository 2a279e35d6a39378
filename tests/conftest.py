import os

import pytest

import devlend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPOS = os.path.join(ROOT, "python", "devlend", "topologies")


def topo_path(name: str) -> str:
    return os.path.join(TOPOS, name)


@pytest.fixture
def two_host():
    return devlend.load(topo_path("pxh830-two-host.yaml")).build()


@pytest.fixture
def three_host():
    return devlend.load(topo_path("three-host-cluster.yaml")).build()
