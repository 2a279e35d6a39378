"""The device runs' errors (devlend-devices, the experiments' GPU and NVMe procedures, the fio job
model in devlend-workloads): devlend's own error classes with a kind, one plain line on the
command line, never a traceback and never a message in JSON quotes."""


import pytest

from devlend import DeviceError, FabricError
from devlend.experiments import _gpu, fio as fio_exp, nvme

import clirun
from conftest import ROOT, topo_path


def cli(*args):
    return clirun.run(*args, cwd=ROOT)


def test_a_gpu_the_topology_lacks_is_a_device_error_naming_it():
    js = _gpu.topology_json("pxh830-two-host.yaml")
    with pytest.raises(DeviceError) as e:
        _gpu.memcpy_ps(js, "borrower", "gpu9", True, 4096)
    assert e.value.kind == "fabric"
    assert "gpu9" in str(e.value) and not str(e.value).startswith('"')


def test_a_copy_larger_than_the_gpu_memory_is_a_copy_size_error():
    js = _gpu.topology_json("pxh830-two-host.yaml")
    with pytest.raises(DeviceError) as e:
        _gpu.memcpy_ps(js, "borrower", "gpu0", True, 1 << 40)
    assert e.value.kind == "copy-size"
    assert "do not fit the GPU's" in str(e.value)


def test_an_nvme_read_of_a_missing_drive_is_a_device_error():
    with pytest.raises(DeviceError, match="nvme9") as e:
        _gpu.device_call(nvme._core.nvme_read, nvme._json(), "borrower", "nvme9", [0], 8)
    assert e.value.kind == "fabric"


def test_fio_on_a_missing_drive_is_a_fabric_error_of_devlend():
    with pytest.raises(FabricError, match="fio: cannot set up the testbed: .*nvme9"):
        fio_exp.run_fio(fio_exp.topology_json(), "borrower", "randread", 1, 1, 4, device="nvme9")


def test_the_cli_prints_a_device_error_as_one_line(tmp_path):
    # d1 on a topology where gpu0 is an NVMe drive: no BAR 1 for the GPU model to window onto.
    text = open(topo_path("pxh830-two-host.yaml")).read().replace("profile: quadro-k420", "profile: optane-900p")
    text = "\n".join(line for line in text.splitlines() if "gpu0.bar1" not in line) + "\n"
    p = tmp_path / "nvme-as-gpu.yaml"
    p.write_text(text)
    r = cli("experiment", "d1", "--quick", "--topology", str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "devlend: error: gpu0 has no BAR 1" in r.stderr, r.stderr
