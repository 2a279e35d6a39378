"""The device registry (`crates/devlend-drivers/src/registry.rs`) is the one list of device kinds
outside the device models, their drivers and their profiles: the topology schema's `kind`, the
lspci import's modelled kinds and the workloads' kind checks ask it (`devlend._core.device_kinds()`
from Python), and no workload, binding or front-end file names a kind by itself, beyond the
exceptions listed here with why."""

import json
import os
import re

import devlend
from conftest import ROOT, topo_path
from devlend import _core
from devlend.errors import WorkloadError
from devlend.lspci.assemble import _modelled
from devlend.topology import json_schema

KINDS = _core.device_kinds()

# Files that would have to change for a new device type if they named kinds themselves.
SCANNED = [os.path.join("crates", "devlend-workloads", "src"), os.path.join("crates", "devlend-py", "src"),
           # a kind's own settings are its [device_kind.KIND] table's (issue 31)
           os.path.join("crates", "devlend-fabric", "src", "tuning.rs"),
           *(os.path.join("python", "devlend", f) for f in ("topology.py", "scenario_file.py", "scenario.py", "pool.py"))]

# (file, text on the line, why the kind's name is legitimately there).
ALLOWED = [
    ("scenario.rs", 'Kind::Nic => "nic"', "the workload's own name (`nic`, the hyper-tenant NIC workload), not a device kind"),
    ("uml.rs", '"nvme" => devlend_uml::PciFunction::nvme', "devlend-uml's device server serves NVMe drives only"),
    ("uml.rs", 'kind "nvme"', "the doc of that argument"),
    ("scenario_file.py", 'Literal["nic"]', "the `nic` workload's action name"),
    ("scenario_file.py", '"nic": NicWork', "the `nic` workload's action name"),
    ("scenario_file.py", '("gpu", "gpu")', "the `gpu_copy` workload's field `gpu`"),
    ("scenario_file.py", '("nic", "nic")', "the `nic` workload's field `nic`"),
    ("tuning.rs", 'ParamFault::OtherKind { key: "media_bandwidth"', "a unit test's expected fault: a GPU given an NVMe drive's own setting"),
]


def _files():
    for entry in SCANNED:
        path = os.path.join(ROOT, entry)
        if os.path.isdir(path):
            for d, _, names in os.walk(path):
                yield from (os.path.join(d, n) for n in sorted(names) if n.endswith(".rs"))
        else:
            yield path


def test_registry_lists_the_modelled_kinds_then_generic():
    assert KINDS[-1] == "generic" and len(set(KINDS)) == len(KINDS)
    assert {"gpu", "nvme", "nic"} <= set(KINDS)
    assert _modelled() == tuple(KINDS[:-1])


def test_the_schema_kind_is_the_registry():
    kind = json_schema()["$defs"]["Device"]["properties"]["kind"]["anyOf"][0]
    assert kind["enum"] == KINDS
    with open(os.path.join(ROOT, "python", "devlend", "topologies", "topology.schema.json")) as fh:
        published = json.load(fh)["$defs"]["Device"]["properties"]["kind"]["anyOf"][0]
    assert published["enum"] == KINDS, "run: devlend schema -o topologies/topology.schema.json"


def test_no_workload_binding_or_front_end_file_names_a_device_kind():
    literal = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, KINDS)))
    found = []
    for path in _files():
        name = os.path.basename(path)
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            if literal.search(line) and not any(f == name and text in line for f, text, _ in ALLOWED):
                found.append(f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()}")
    assert not found, "device kinds named outside the registry (ask devlend_drivers::registry):\n" + "\n".join(found)
    rust = [p for p in _files() if p.endswith(".rs")]
    assert not [p for p in rust if "DeviceKind::" in open(p, encoding="utf-8").read()], "match on the fabric's DeviceKind: ask the registry"


def test_a_workload_asks_for_what_a_device_serves_and_names_the_kinds_that_do():
    """fio asks for a device that serves block I/O, a GPU copy for one that serves copies; the
    error names the kinds that serve it (the registry's) and the device's own, as before."""
    s = devlend.Scenario(topo_path("three-host-cluster.yaml"))
    for add, message in [
        (lambda: s.fio("f", "borrower", "gpu0", "randread"), "workload f: gpu0 is not a nvme device (its kind is gpu)"),
        (lambda: s.gpu_copy("c", "borrower", "ntb-b-a", "htod", 1 << 20), "workload c: ntb-b-a is not a gpu device (an NTB adapter)"),
    ]:
        try:
            add()
        except WorkloadError as e:
            assert (e.kind, str(e)) == ("wrong-kind", message)
        else:
            raise AssertionError("accepted")


def test_fio_and_gpu_copy_are_written_against_the_services_not_a_driver():
    """The fio and gpu_copy workloads get their device's model and driver from the registry by
    kind (`devlend_drivers::service`): they name no device model or driver (a new type that
    serves block I/O or copies runs them unchanged: devlend-workloads' tests/it/service.rs). One
    exception: fio's error gives the NVMe status underneath, for `NvmeStatusError`."""
    src = os.path.join(ROOT, "crates", "devlend-workloads", "src")
    files = ["fio.rs", "fio_job.rs", os.path.join("fio_job", "thread.rs"), os.path.join("fio_job", "error.rs"), "gpu.rs"]
    concrete = re.compile(r"\b(gpu_driver|nvme_driver|gpu_run|nvme_run|devlend_devices)\b")
    allowed = ("fio_job/error.rs", "use devlend_drivers::nvme_driver::NvmeError;")
    found = []
    for f in files:
        for n, line in enumerate(open(os.path.join(src, f), encoding="utf-8"), 1):
            code = line.split("//")[0]
            if concrete.search(code) and (f.replace(os.sep, "/"), line.strip()) != allowed:
                found.append(f"{f}:{n}: {line.strip()}")
    assert not found, "a service workload names a device type's model or driver:\n" + "\n".join(found)
