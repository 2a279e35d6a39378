"""Import a real machine's PCIe hierarchy as a topology description (``devlend import-lspci``).

Modules: ``common`` (results, the per-function intermediate form), ``tree`` (``lspci -tv``),
``verbose`` (``lspci -vvv``), ``sysfs`` (a saved ``/sys/bus/pci/devices``), ``assemble`` (functions
to the schema); this package's ``main_import`` is the CLI's entry point.

Two sources, one result:

* the output of ``lspci -tvnn`` (the tree) and ``lspci -vvv`` (or ``-vvvnn``) captured on Linux, as
  root so that capabilities are shown: :func:`parse_lspci`;
* a saved copy of ``/sys/bus/pci/devices`` (format below): :func:`parse_sysfs`.

Public API
----------
``parse_lspci(tree_text, verbose_text, *, host_name="imported", cpu="intel-xeon-e5", ram=None,
tree_file="<tree>", verbose_file="<verbose>") -> ImportResult``
    ``tree_text``/``verbose_text`` are the two captures as text; ``ram`` is bytes (``None``: 16 GiB,
    noted); ``*_file`` name the captures in error messages.

``parse_sysfs(root, *, host_name="imported", cpu="intel-xeon-e5", ram=None, tree_text=None,
tree_file="<tree>") -> ImportResult``
    ``root`` is the directory; ``tree_text`` optionally supplies parents (see below).

``main_import(tree, verbose, sysfs, host, cpu, ram, output) -> str``
    The CLI entry point. ``tree``: path of the ``lspci -tvnn`` capture; ``verbose``: path of the
    ``lspci -vvv`` capture, or ``None``; ``sysfs``: path of a saved sysfs directory, or ``None``
    (with ``sysfs`` the tree is optional, ``""``/``None`` to leave it out, and only supplies
    parents; one of ``verbose`` and ``sysfs`` is required); ``host``: host name; ``cpu``: CPU
    profile; ``ram``: size text such as ``"64 GiB"`` or ``None``; ``output``: path to write, or
    ``None``. Returns the YAML text (also when it writes it): a header comment naming the source
    files, which PCI function each component came from, what was skipped and why, and notes;
    then the description (``yaml.safe_dump``, ``sort_keys=False``).

``decode_text(data: bytes, file: str) -> str``
    UTF-8 decoding that reports undecodable input as a :class:`TopologyError` with its line.

``ImportResult``
    ``description`` (a dict :func:`devlend.topology.from_dict` accepts), ``skipped`` (a list of
    :class:`Skipped`: ``bdf``, ``what``, ``reason``, ``file``, ``line``), ``notes`` (assumptions
    and choices worth reading), ``components`` (component name -> the PCI function(s) it came
    from); ``topology()``, ``build()`` (maps a build error back to the capture line it came from)
    and ``to_yaml()``.

Every problem with the input -- empty, truncated, binary, malformed, or tree and verbose output
that disagree -- raises :class:`devlend.errors.TopologyError` naming the file, the 1-based line
(and for the tree, the column) and what was expected.

How the hierarchy maps to the schema
------------------------------------
* One host. Its root ports are the bridges on a root bus (``[0000:00]``; also ``[0000:80]`` and
  the like on multi-socket machines) that have devices behind them or a PCIe Root Port
  capability, in address order: the first is ``HOST.rp0``.
* A bridge below a port with the PCIe "Upstream Port" capability (or, when capabilities are not
  visible, any bridge below a port) is a switch; the bridges on its internal bus ("Downstream
  Port") are its ports ``d0``, ``d1``, ... in address order, empty ones included.
* The endpoint functions behind a port form one device (several functions: a multi-function
  device; with ARI, functions past 7 sit at device numbers above 0). ``kind`` comes from the class:
  VGA/3D/display controller -> ``gpu``, Non-Volatile memory controller -> ``nvme``,
  Ethernet/Network -> ``nic``, anything else ``generic``. An endpoint of class "Bridge" (0680, the
  class of PLX/IDT/Dolphin NT functions) becomes an ``ntbs`` entry whose windows are its BAR2/BAR4.
* BARs come from the ``Region N: Memory at ...`` lines (I/O regions and expansion ROMs are left
  out; a disabled or unassigned region still has its size). MSI-X vectors from
  ``MSI-X: Enable+ Count=N``. SR-IOV from the SR-IOV capability (``Number of VFs``, ``Total VFs``);
  the VF BAR sizes from the first VF's own ``Region`` lines (lspci prints no sizes inside the
  capability; a ``[size=]`` there is used when present). VFs are not listed as devices.
* Links take generation and width from the device's ``LnkSta`` (else the port's): 2.5 GT/s -> 1,
  5 -> 2, 8 -> 3, 16 -> 4, 32 -> 5; widths round down to x1/2/4/8/12/16.
* Names are derived from kind and address: ``gpu-04-00``, ``nvme-05-00``, ``nic-06-00``,
  ``ntb-08-00``, ``dev-..`` (generic), ``sw-02-00``; a non-zero PCI domain is included
  (``gpu-10000-04-00``).
* What the schema cannot hold is skipped and listed in ``skipped``: functions on a root bus that
  are not root ports (host bridge, chipset devices, uncore devices), bridges on a root bus with
  nothing behind them, conventional PCI bridges and what is behind them, endpoints on a switch's
  internal bus, more than one device behind one port.
* The host's ``iommu`` is true when the capture shows IOMMU groups. Addresses in the capture are
  not used: devlend enumerates and assigns resources itself.

Saved sysfs format (:func:`parse_sysfs`)
----------------------------------------
``root`` holds one entry per PCI function named by its full address, e.g. ``0000:3b:00.0``
(other entries are ignored and noted). Each entry is a directory (or, on a live system, the
kernel's symlink) with these text files:

* ``class`` (``0x030000``), ``vendor`` (``0x10de``), ``device`` (``0x1bb1``): required.
* ``resource``: required; the kernel's lines ``START END FLAGS`` (hex). Lines 0-5 are the BARs,
  line 6 the ROM, lines 7-12 the SR-IOV VF BARs (each spanning all Total VFs), later lines bridge
  windows. A line is a memory BAR when ``FLAGS & 0x200`` (IORESOURCE_MEM); ``& 0x2000``
  (IORESOURCE_PREFETCH) marks it prefetchable and ``& 0x100000`` (IORESOURCE_MEM_64) 64-bit.
* ``current_link_speed`` (``8.0 GT/s PCIe``), ``current_link_width`` (``16``),
  ``max_link_speed``, ``max_link_width``: optional.
* ``sriov_totalvfs``, ``sriov_numvfs``, ``sriov_offset``, ``sriov_stride``: optional (a PF).
* ``config``: optional, the binary config space; gives the PCIe port type, MSI-X table size and
  link status.
* ``parent``: optional, one line with the full address of the bridge above (``0000:00:02.0``), or
  empty / ``none`` for a function on a root bus. A plain ``cp -r`` of sysfs loses the symlinks that
  encode the hierarchy, so save it with
  ``for d in /sys/bus/pci/devices/*; do n=$(basename $d); mkdir -p out/$n;
  cp $d/{class,vendor,device,resource} out/$n/; p=$(basename $(dirname $(readlink -f $d)));
  case $p in pci*) : > out/$n/parent;; *) echo $p > out/$n/parent;; esac; done``.
  Without a ``parent`` file the parent comes from the entry's symlink target (live sysfs), else
  from ``tree_text`` (an ``lspci -tvnn`` capture of the same machine), else the function is taken
  to sit on a root bus.
* ``physfn``: optional, the PF's full address (or the kernel's symlink): this function is a VF.
* ``iommu_group``: optional; its presence on any function turns the host's IOMMU on.
"""

from __future__ import annotations

from dataclasses import field
from typing import Optional

from ..errors import TopologyError
from ..sizes import parse_size
from .common import ImportResult, Loc, Skipped, decode_text
from .tree import _TreeParser
from .verbose import parse_lspci
from .sysfs import parse_sysfs


__all__ = ["ImportResult", "Loc", "Skipped", "decode_text", "main_import", "parse_lspci", "parse_sysfs"]

# ---------------------------------------------------------------------------------------------
# The CLI's entry point

def _read_text(path: str) -> str:
    from ..inputs import not_regular
    if (kind := not_regular(path)) is not None:
        raise TopologyError(f"{kind}: expected a file with lspci output", file=path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise TopologyError("no such file", file=path) from None
    except IsADirectoryError:
        raise TopologyError("a directory: expected a file with lspci output", file=path) from None
    except OSError as e:
        raise TopologyError(f"cannot read: {e.strerror}", file=path) from None
    return decode_text(data, path)


def main_import(tree: Optional[str], verbose: Optional[str], sysfs: Optional[str], host: str, cpu: str,
                ram: Optional[str], output: Optional[str]) -> str:
    """Import and return the YAML text; write it to ``output`` too when given (see the module doc)."""
    ram_bytes = None
    if ram is not None:
        try:
            ram_bytes = parse_size(ram)
        except ValueError as e:
            raise TopologyError(str(e), field="hosts[0].ram") from None
    if sysfs:
        tree_text = _read_text(tree) if tree else None
        res = parse_sysfs(sysfs, host_name=host, cpu=cpu, ram=ram_bytes, tree_text=tree_text, tree_file=tree or "<tree>")
    else:
        if not tree:
            raise TopologyError("need the 'lspci -tvnn' output (the tree) and the 'lspci -vvv' output, "
                                "or a saved sysfs directory")
        if not verbose:
            raise TopologyError("need the 'lspci -vvv' output beside the tree (or a saved sysfs directory)", file=tree)
        res = parse_lspci(_read_text(tree), _read_text(verbose), host_name=host, cpu=cpu, ram=ram_bytes,
                          tree_file=tree, verbose_file=verbose)
    import warnings
    from .profiles import ProfileWarning
    for w in res.warnings:
        warnings.warn(w, ProfileWarning, stacklevel=2)
    return write_output(res.to_yaml(), output)


def write_output(text: str, output: Optional[str]) -> str:
    """`text`, written to `output` first when one is given (a TopologyError naming it if it cannot be)."""
    if output:
        try:
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as e:
            raise TopologyError(f"cannot write: {e.strerror}", file=output) from None
    return text
