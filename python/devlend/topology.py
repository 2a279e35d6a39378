"""Topology descriptions: the YAML schema and the equivalent Python API.

One pydantic model is the schema for both: a YAML file is loaded with line marks and validated
into these models; Python code builds the same models directly. ``devlend schema`` prints the JSON
Schema (published as ``topologies/topology.schema.json``) so editors can complete and check files.

The Rust core receives the validated description as JSON, builds the fabric, enumerates every
host, applies the ``setup`` section, and reports any semantic error (unknown port, cycle, BAR that
does not fit, window past the peer's address space) as a JSON pointer that we turn back into the
file, line and field here.

Ports in ``links``: the upstream end ``a`` is ``HOST.rpN`` or ``SWITCH.dN``; the downstream end
``b`` is ``SWITCH`` (its upstream port), ``DEVICE`` or ``NTB`` (its slot side). An NTB cable joins
``NTB1.cable`` to ``NTB2.cable`` in two different hosts, or an adapter's cable to a port
``CLUSTERSWITCH.pN`` of an NTB cluster switch (``cluster_switches``: every adapter cabled to it
reaches every other). An adapter with several cable ports (``cable_ports``, the PXH830 has two)
names them ``NTB.cable0``, ``NTB.cable1``.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema

from . import _core
from .errors import TopologyError
from .sizes import parse_addr, parse_size
from .yamlpos import document_path, dotted, load_with_marks, locate, pointer_to_path

_SIZE_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 0},
                          {"type": "string", "pattern": r"^\s*(0x[0-9a-fA-F_]+|[0-9][0-9_]*)\s*([KMGT]i?B?|[kmgt]i?b?|B|b)?\s*$"}],
                "description": "bytes: an integer, hex, or a string with a binary unit ('256 MiB')"}
_ADDR_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}],
                "description": "an address: integer, hex string, or expression FUNC.barN / HOST.ram / HOST.msi / NTB.mwN with +OFFSET"}

Size = Annotated[int, BeforeValidator(parse_size), WithJsonSchema(_SIZE_SCHEMA)]
Address = Annotated[Union[int, str], BeforeValidator(parse_addr), WithJsonSchema(_ADDR_SCHEMA)]
Name = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$", description="letters, digits, '-' and '_'")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True)


class MemoryMap(_Model):
    """Overrides of the CPU profile's physical address map (each 1 MiB aligned)."""
    low_ram_top: Optional[Size] = None
    mmio32_end: Optional[Size] = None
    mmio64_base: Optional[Size] = None


class Host(_Model):
    """A host: its own PCIe domain and physical address space."""
    name: Name
    cpu: str = Field(description="CPU/chipset profile from params/hardware.toml, e.g. intel-xeon-e5, amd-epyc")
    ram: Size = Field(description="RAM size; laid out x86-style below the 32-bit MMIO hole and from 4 GiB")
    iommu: bool = False
    interrupt_remapping: Optional[bool] = Field(
        default=None, description="VT-d interrupt remapping: on wherever the IOMMU is unless false (Linux intremap=off); needs iommu: true")
    root_ports: int = Field(ge=1, le=31)
    memory_map: Optional[MemoryMap] = None


class Switch(_Model):
    """A transparent PCIe switch: ports SWITCH.up and SWITCH.d0 .. dN-1."""
    name: Name
    profile: Optional[str] = None
    downstream_ports: int = Field(ge=1, le=32)


class Bar(_Model):
    index: int = Field(ge=0, le=5)
    size: Size
    bits: Literal[32, 64] = 32
    pref: bool = False


class Sriov(_Model):
    num_vfs: int = Field(ge=0, le=255)
    total_vfs: Optional[int] = Field(default=None, ge=0, le=65535)
    vf_bars: Optional[list[Bar]] = None


class Function(_Model):
    bars: list[Bar] = []
    msix_vectors: int = Field(default=0, ge=0, le=2048)
    sriov: Optional[Sriov] = None


#: Every kind a device may be: the core's device registry (``devlend_drivers::registry``).
DEVICE_KINDS = tuple(_core.device_kinds())


class Device(_Model):
    """An endpoint: a profile from params/hardware.toml, or explicit functions and BARs."""
    name: Name
    profile: Optional[str] = None
    kind: Optional[Literal[DEVICE_KINDS]] = None
    functions: Optional[list[Function]] = None
    num_vfs: Optional[int] = Field(default=None, ge=0, le=255, description="SR-IOV VFs to enable on a profile device")


class Window(_Model):
    size: Size
    lut_segments: int = Field(default=0, ge=0)


class Ntb(_Model):
    """An NTB adapter: an endpoint in its host with memory-window BARs leading to its cable peer."""
    name: Name
    profile: Optional[str] = None
    windows: Optional[list[Window]] = None
    rid_lut_entries: Optional[int] = Field(default=None, ge=1, le=255)
    doorbells: Optional[int] = Field(default=None, ge=0, le=64)
    scratchpads: Optional[int] = Field(default=None, ge=0, le=255)
    message_registers: Optional[int] = Field(default=None, ge=0, le=255)
    cable_ports: Optional[int] = Field(default=None, ge=1, le=4, description="cable ports NTB.cable0.. (default: the profile's)")


class ClusterSwitch(_Model):
    """An NTB cluster switch (Dolphin MXS824 class): hosts' adapters cabled to its ports
    (``SWITCH.p0``, ...) reach each other through it."""
    name: Name
    profile: Optional[str] = Field(default=None, description="a cluster_switch profile of params/hardware.toml (default mxs824)")
    ports: Optional[int] = Field(default=None, ge=1, le=255)


class Link(_Model):
    a: str = Field(description="upstream end: HOST.rpN, SWITCH.dN, NTB.cable[K] or CLUSTERSWITCH.pN")
    b: str = Field(description="downstream end: SWITCH, DEVICE, NTB, NTB.cable[K] or CLUSTERSWITCH.pN")
    gen: int = Field(ge=1, le=5)
    width: Literal[1, 2, 4, 8, 12, 16]
    kind: Literal["slot", "cable", "pcix"] = "slot"


class NtbMwSetTrans(_Model):
    op: Literal["ntb_mw_set_trans"]
    ntb: str
    window: int = Field(ge=0)
    addr: Address
    size: Size


class NtbLutSetTrans(_Model):
    op: Literal["ntb_lut_set_trans"]
    ntb: str
    window: int = Field(ge=0)
    segment: int = Field(ge=0)
    addr: Address


class NtbRidLutAdd(_Model):
    op: Literal["ntb_rid_lut_add"]
    ntb: str
    requester: str


class IommuDomain(_Model):
    op: Literal["iommu_domain"]
    host: str
    domain: str


class IommuAttach(_Model):
    op: Literal["iommu_attach"]
    host: str
    domain: str
    device: str


class IommuMap(_Model):
    op: Literal["iommu_map"]
    host: str
    domain: str
    iova: Address
    addr: Address
    size: Size
    write: bool = True


class BusMaster(_Model):
    op: Literal["bus_master"]
    device: str
    enable: bool = True


class Borrow(_Model):
    """Device Lending: `borrower` borrows `device` from the host it sits in (the lender connects to
    the borrower, adds the device to the pool and makes it available first, as needed)."""
    op: Literal["borrow"]
    borrower: str
    device: str
    dma_window: Optional[Size] = Field(default=None, description="size of the DMA window the lender opens (default: a whole NTB memory window)")


class Return(_Model):
    """Device Lending: the borrower returns `device` to its lender; every mapping is undone."""
    op: Literal["return"]
    device: str
    borrower: Optional[str] = Field(default=None, description="the host that borrowed it (checked when given)")


class VmDevice(_Model):
    """A device of a VM: passed through with VFIO when it sits in the VM's host, lent through the
    mediated path (000 §5: borrowed when the guest's driver enables bus mastering) when it sits in
    another; ``path`` states which, or is left out for the one its place implies."""
    device: str
    path: Optional[Literal["vfio", "mediated"]] = None


def _vm_device(v: Any) -> Any:
    return {"device": v} if isinstance(v, str) else v


class Vm(_Model):
    """A virtual machine: its RAM, the host it runs on and its devices. Workloads name it as their
    runner as they name a host; its guest kernel drives the devices it gets here."""
    name: Name
    host: str
    memory: Size = Field(description="guest RAM: a multiple of 2 MiB, more than the guest kernel's 16 MiB")
    devices: list[Annotated[VmDevice, BeforeValidator(_vm_device)]] = Field(
        default=[], description="device names, or {device, path: vfio|mediated}")


ParamValue = Union[bool, int, float, str]


class Params(_Model):
    """Overrides of hardware constants (``[timing]`` of params/hardware.toml), checked by the core:
    ``timing`` for every component, ``hosts``/``devices`` by name, ``links`` by either end exactly as
    ``links`` writes it (``HOST.rp0``, ``gpu0``, ``ntb-a.cable``). Values are integers in the
    constant's unit (ps, bytes, metres) or strings with a unit ('350 ns', '4 KiB'). The MPS a path
    uses is the smallest of every link on it and the devices at their ends (PCIe Base 3.0 §2.2.2)."""
    timing: dict[str, ParamValue] = Field(default={}, description="every component: max_payload, max_read_request, ntb_latency_ps, ...")
    cpus: dict[str, dict[str, ParamValue]] = Field(default={}, description="per CPU profile (every host of it): root_latency_ps, ram_write_line_ps, ram_write_tlp_ps")
    hosts: dict[str, dict[str, ParamValue]] = Field(default={}, description="per host: root_latency_ps, ram_completion_bytes, ram_write_line_ps, ram_write_tlp_ps, read_split_bytes, read_tags, max_read_request, irq_entry_ps, cuda_call_ps, interrupt_remapping")
    devices: dict[str, dict[str, ParamValue]] = Field(default={}, description="per device: endpoint_latency_ps, max_payload, max_read_request, read_tags, dma_issue_ps, dma_completion_ps, sm_to_pcie_ps, sm_poll_ps, dma_read_interval_ps, dma_write_interval_ps, dma_read_line_ps; an NVMe drive also media_read_latency_ps, media_write_latency_ps, media_bandwidth, media_parallelism, capacity")
    links: dict[str, dict[str, ParamValue]] = Field(default={}, description="per link ('*': every link): max_payload, rx_buffer_tlps, cable_length_m, gen, width")
    limits: dict[str, ParamValue] = Field(default={}, description="devlend's own bounds: memory_bytes, the simulated memory a run's workloads may hold")


def parse_sets(items: list[str]) -> dict:
    """``--set`` values (``timing.max_payload=128``, ``links.ntb-a.cable.cable_length_m=5``) as a
    dict for Topology.with_params; a value that reads as a number or a boolean becomes one."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise TopologyError(f"--set {item!r}: expected SCOPE.KEY=VALUE, e.g. timing.max_payload=128")
        v: Any = value.strip()
        low = v.lower()
        if low in ("true", "false"):
            v = low == "true"
        else:
            try:
                v = int(v, 0)
            except ValueError:
                pass
        out[key.strip()] = v
    return out


SetupOp = Annotated[Union[NtbMwSetTrans, NtbLutSetTrans, NtbRidLutAdd, IommuDomain, IommuAttach, IommuMap, BusMaster, Borrow, Return],
                    Field(discriminator="op")]
LENDING_OPS = (Borrow, Return)
_OP_MODELS = {"ntb_mw_set_trans": NtbMwSetTrans, "ntb_lut_set_trans": NtbLutSetTrans, "ntb_rid_lut_add": NtbRidLutAdd,
              "iommu_domain": IommuDomain, "iommu_attach": IommuAttach, "iommu_map": IommuMap, "bus_master": BusMaster,
              "borrow": Borrow, "return": Return}


class Topology(_Model):
    """A PCIe cluster: hosts, switches, devices, NTB adapters, the links between them, and
    optional programming (NTB translations, IOMMU mappings) applied after enumeration, then
    Device Lending's borrow and return operations (applied by devlend.Pool, in order), and
    virtual machines on the hosts (started by a Scenario, checked by ``build``)."""
    name: Name
    description: Optional[str] = None
    source: Optional[str] = Field(default=None, description="where this setup comes from, e.g. '000 Fig 9'")
    hosts: list[Host] = Field(min_length=1)
    switches: list[Switch] = []
    devices: list[Device] = []
    ntbs: list[Ntb] = []
    cluster_switches: Optional[list[ClusterSwitch]] = None
    links: list[Link] = []
    setup: list[SetupOp] = []
    params: Optional[Params] = None
    vms: list[Vm] = []

    # Where the description came from, for error messages (not part of the schema).
    _file: Optional[str] = None
    _marks: dict = {}
    # Overrides given by with_params: their path under params -> where they came from, for errors.
    _sets: dict = {}

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True, exclude=None if self.vms else {"vms"})

    def with_params(self, overrides: dict, origin: Union[str, tuple] = "override") -> "Topology":
        """A copy with `overrides` merged into its ``params`` section, without editing the file:
        nested (``{"timing": {"max_payload": 128}}``) or dotted keys (``{"timing.max_payload": 128,
        "links.gpu0.max_payload": 128, "hosts.lender.root_latency_ps": "200 ns"}``). Checked when
        the fabric is built, as the file's own section is. An error in an override names it as
        `origin` gave it (``--set timing.max_payload=100``); one in the file's own section names
        file, line and field."""
        merged = self.params.model_dump() if self.params else {}
        sets = dict(self._sets)

        def flatten(prefix: str, value: Any) -> None:
            if isinstance(value, dict):
                for k, v in value.items():
                    flatten(f"{prefix}.{k}" if prefix else str(k), v)
            else:
                sets[self._merge(merged, prefix, value, origin)] = (origin, prefix, value)
        flatten("", overrides)
        try:
            params = Params.model_validate(merged)
        except ValidationError as e:
            err = _pydantic_error(e, None, {}, merged)
            path = ("params",) + tuple(int(p) if p.isdigit() else p for p in (err.field or "").replace("[", ".").replace("]", "").split(".") if p)
            raise self._error(path, err.message, sets) from None
        topo = self.model_copy(update={"params": params})
        topo._file, topo._marks, topo._sets = self._file, self._marks, sets
        return topo

    def _merge(self, merged: dict, key: str, value: Any, origin: str) -> tuple:
        """Merge override `key` into `merged`; its path under the topology."""
        scope, _, rest = key.partition(".")
        if scope in ("timing", "limits") and rest and "." not in rest:
            merged.setdefault(scope, {})[rest] = value
            return ("params", scope, rest)
        name, _, const = rest.rpartition(".")
        if scope not in ("cpus", "hosts", "devices", "links") or not name:
            raise _override_error(f"override {key!r}: expected timing.KEY, limits.KEY, cpus.PROFILE.KEY, hosts.NAME.KEY, devices.NAME.KEY "
                                  "or links.END.KEY (links.*.KEY: every link)",
                                  (origin, key, value))
        merged.setdefault(scope, {}).setdefault(name, {})[const] = value
        return ("params", scope, name, const)

    def lending_ops(self) -> list[tuple[int, Union[Borrow, Return]]]:
        """The borrow and return operations with their index in ``setup``. They must follow every
        NTB and IOMMU operation: the fabric applies those when it is built, before any borrow."""
        ops = [(i, op) for i, op in enumerate(self.setup) if isinstance(op, LENDING_OPS)]
        if ops:
            late = next((i for i, op in enumerate(self.setup) if i > ops[0][0] and not isinstance(op, LENDING_OPS)), None)
            if late is not None:
                raise self._error(("setup", late, "op"), f"'{self.setup[late].op}' after a borrow or return operation: the fabric applies "
                                  "NTB and IOMMU operations when it is built, before any borrow, so they come first")
        return ops

    def fabric_json(self) -> str:
        """The description without its borrow and return operations (what the fabric builds)."""
        lending = {i for i, _ in self.lending_ops()}
        data = self.model_dump(mode="json", exclude_none=True, exclude=None if self.vms else {"vms"})
        data["setup"] = [op for i, op in enumerate(data["setup"]) if i not in lending]
        return json.dumps(data)

    def build(self) -> "Fabric":
        """Build, enumerate and program the fabric; raise TopologyError with file and line on failure.
        A topology with borrow or return operations needs the Device Lending agents: use devlend.Pool."""
        from . import _core
        from .fabric import Fabric
        ops = self.lending_ops()
        if ops:
            raise self._error(("setup", ops[0][0], "op"), f"a '{ops[0][1].op}' operation needs the hosts' Device Lending agents: "
                              "open this topology with devlend.Pool (or `devlend pool`), or name it in a scenario file")
        try:
            core = _core.Fabric.from_json(self.to_json())
            if self.vms:
                _core.vms_check(self.to_json())
        except _core.SpecError as e:
            pointer, message = e.args
            raise self._error(pointer_to_path(pointer), message) from None
        return Fabric(core, self)

    def _error(self, path: tuple, message: str, sets: Optional[dict] = None) -> TopologyError:
        """An error at `path`: named as its override was given when one was (``--set K=V``), else
        by file, line and field."""
        for p, given in (self._sets if sets is None else sets).items():
            if path[:len(p)] == p or (len(path) >= 3 and p[:len(path)] == path):
                return _override_error(message, given)
        line, col = locate(self._marks, path) if self._marks else (None, None)
        return TopologyError(message, file=self._file, line=line, column=col, field=dotted(path) or None)


def _override_error(message: str, given: tuple) -> TopologyError:
    """An error in override (origin, key, value): at its file and line when `origin` is a (file,
    line) pair (a scenario file's own ``params``), else named as it was given (``--set K=V``)."""
    origin, key, value = given
    if isinstance(origin, tuple):
        return TopologyError(message, file=origin[0], line=origin[1], field=f"params.{key}")
    where = "command line" if origin.startswith("--set") else f"<{origin}>"
    return TopologyError(message, file=where, field=f"{origin} {key}={value}")


def _pydantic_error(e: ValidationError, file: str | None, marks: dict, data: Any = None) -> TopologyError:
    errors = e.errors(include_url=False)
    # An unknown key explains a "missing" one next to it (a typo), so report it first.
    err = sorted(errors, key=lambda x: x["type"] != "extra_forbidden")[0]
    loc = document_path(err["loc"], _OP_MODELS)
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = f"unknown key '{loc[-1]}'"
        parent = loc[:-1]
        model = _model_at(parent, data)
        if model is not None:
            msg += f": expected one of {', '.join(model.model_fields)}"
    elif err["type"] == "missing":
        msg = f"required field '{loc[-1]}' is missing"
    else:
        got = err.get("input")
        if not isinstance(got, (dict, list)):
            msg += f" (got {got!r})"
    line, col = locate(marks, loc) if marks else (None, None)
    return TopologyError(msg, file=file, line=line, column=col, field=dotted(loc) or None)


def _model_at(path: tuple, data: Any = None) -> Any:
    if len(path) == 2 and path[0] == "setup" and isinstance(data, dict):
        try:
            return _OP_MODELS.get(data["setup"][path[1]]["op"])
        except (KeyError, IndexError, TypeError):
            return None
    names = [p for p in path if not isinstance(p, int)]
    if names[:1] == ["vms"]:
        return {1: Vm, 2: VmDevice}.get(len(names))
    model: Any = Topology
    fields = {"hosts": Host, "switches": Switch, "devices": Device, "ntbs": Ntb, "cluster_switches": ClusterSwitch, "links": Link, "memory_map": MemoryMap,
              "functions": Function, "bars": Bar, "sriov": Sriov, "vf_bars": Bar, "windows": Window, "params": Params}
    for p in path:
        if isinstance(p, int):
            continue
        model = fields.get(p)
        if model is None:
            return None
    return model


def from_dict(data: Any, *, file: str | None = None, marks: dict | None = None) -> Topology:
    if not isinstance(data, dict):
        raise TopologyError(f"expected a mapping with 'name' and 'hosts' at the top, got {type(data).__name__}", file=file, line=1)
    try:
        topo = Topology.model_validate(data)
    except ValidationError as e:
        raise _pydantic_error(e, file, marks or {}, data) from None
    topo._file = file
    topo._marks = marks or {}
    topo.lending_ops()
    return topo


def loads(text: str, file: str = "<string>") -> Topology:
    data, marks = load_with_marks(text, file)
    return from_dict(data, file=file, marks=marks)


def load(path: str | os.PathLike) -> Topology:
    """Load and validate a topology file (YAML or JSON)."""
    path = os.fspath(path)
    from .inputs import not_regular
    if (kind := not_regular(path)) is not None:
        raise TopologyError(f"is {kind}, expected a topology file", file=path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise TopologyError("no such file", file=path) from None
    except IsADirectoryError:
        raise TopologyError("is a directory, expected a topology file", file=path) from None
    except OSError as e:
        raise TopologyError(f"cannot read: {e.strerror}", file=path) from None
    except UnicodeDecodeError as e:
        raise TopologyError(f"not UTF-8 text: {e.reason} at byte {e.start}", file=path) from None
    return loads(text, path)


def json_schema() -> dict:
    schema = Topology.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "devlend topology"
    return schema


def schema_json() -> str:
    return json.dumps(json_schema(), indent=2) + "\n"
