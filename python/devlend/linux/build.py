"""``devlend linux build``: the UML guest kernel, built from the distribution's Linux source.

The source is Debian's ``linux-source-6.12`` tarball (installed with apt-get where we are root) or
any unpacked tree of 6.6 or later given by path. The kernel is ``make ARCH=um defconfig`` with
``uml.config`` merged over it, cached under ``$XDG_CACHE_HOME/devlend/linux/<key>/linux`` where the
key hashes the source's version and the fragment, so a changed fragment or source builds anew.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..errors import DevlendError

DEBIAN_PACKAGE = "linux-source-6.12"
DEBIAN_TARBALL = Path("/usr/src/linux-source-6.12.tar.xz")
FRAGMENT = Path(__file__).with_name("uml.config")
TOOLS = ("make", "gcc", "flex", "bison", "bc")
MIN_VERSION = (6, 6)


class LinuxBuildError(DevlendError):
    """The guest kernel cannot be built: ``kind`` is "source" (no Linux source), "toolchain" (a
    build tool is missing), "version" (a tree older than 6.6) or "build" (make failed; the message
    carries the log's path and its last lines)."""

    def __init__(self, message: str, kind: str):
        self.kind = kind
        super().__init__(message)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "devlend" / "linux"


def _tree_version(tree: Path) -> tuple[int, int, int]:
    try:
        head = (tree / "Makefile").read_text(errors="replace")[:2000]
    except OSError:
        raise LinuxBuildError(f"{tree}: not a Linux source tree (no Makefile)", "source") from None
    nums = [re.search(rf"^{k} = (\d+)", head, re.M) for k in ("VERSION", "PATCHLEVEL", "SUBLEVEL")]
    if not all(nums):
        raise LinuxBuildError(f"{tree}/Makefile: no VERSION/PATCHLEVEL/SUBLEVEL lines: not a Linux source tree", "source")
    return tuple(int(m.group(1)) for m in nums)  # type: ignore[return-value]


def _debian_source() -> tuple[Path, str]:
    """The unpacked Debian source (unpacking the tarball into the cache once), and its version."""
    if not DEBIAN_TARBALL.exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", DEBIAN_PACKAGE], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
    if not DEBIAN_TARBALL.exists():
        raise LinuxBuildError(f"no Linux source: install it with `apt-get install {DEBIAN_PACKAGE}` "
                              f"(expected {DEBIAN_TARBALL}) or give a 6.6+ tree with --source PATH", "source")
    st = DEBIAN_TARBALL.stat()
    stamp = f"{DEBIAN_TARBALL}:{st.st_size}:{int(st.st_mtime)}"
    src = cache_root() / "src"
    tree = src / "linux-source-6.12"
    marker = src / ".unpacked"
    if not tree.exists() or not marker.exists() or marker.read_text() != stamp:
        shutil.rmtree(tree, ignore_errors=True)
        src.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-xJf", str(DEBIAN_TARBALL), "-C", str(src)], check=True)
        marker.write_text(stamp)
    return tree, stamp


def _check_tools() -> None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise LinuxBuildError(f"cannot build the guest kernel: missing {', '.join(missing)}; install them "
                              "(Debian: apt-get install build-essential flex bison bc libelf-dev)", "toolchain")


def kernel_key(stamp: str, version: tuple[int, int, int]) -> str:
    h = hashlib.sha256()
    h.update(f"{stamp}\n{'.'.join(map(str, version))}\n".encode())
    h.update(FRAGMENT.read_bytes())
    return h.hexdigest()[:16]


def build(source: str | None = None, jobs: int | None = None, log=None) -> Path:
    """Build (or reuse) the guest kernel; returns the path of the ``linux`` executable."""
    if source:
        tree = Path(source).resolve()
        version = _tree_version(tree)
        stamp = f"{tree}"
    else:
        tree, stamp = _debian_source()
        version = _tree_version(tree)
    if version[:2] < MIN_VERSION:
        raise LinuxBuildError(f"{tree}: Linux {'.'.join(map(str, version))} is too old: the guest needs 6.6 or later", "version")
    out = cache_root() / kernel_key(stamp, version)
    binary = out / "linux"
    if binary.exists():
        return binary
    _check_tools()
    out.mkdir(parents=True, exist_ok=True)
    logfile = out / "build.log"
    jobs = jobs or os.cpu_count() or 1
    make = ["make", "-C", str(tree), f"O={out}", "ARCH=um", f"-j{jobs}"]
    steps = [make + ["defconfig"],
             [str(tree / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(out), str(out / ".config"), str(FRAGMENT)],
             make + ["olddefconfig"],
             make + ["linux"]]
    with open(logfile, "w") as f:
        for step in steps:
            if log:
                log(" ".join(step))
            env = dict(os.environ, ARCH="um")
            r = subprocess.run(step, stdout=f, stderr=subprocess.STDOUT, cwd=out, env=env)
            if r.returncode != 0:
                f.flush()
                tail = "".join(open(logfile, errors="replace").readlines()[-15:])
                raise LinuxBuildError(f"building the guest kernel failed ({' '.join(step[:1] + step[-1:])}); "
                                      f"log {logfile}, last lines:\n{tail}", "build")
    _check_fragment(out / ".config")
    if not binary.exists():
        raise LinuxBuildError(f"make finished but {binary} is missing; log {logfile}", "build")
    return binary


def _check_fragment(config: Path) -> None:
    """Every option the fragment sets must survive olddefconfig (a dependency may drop one)."""
    have = set(config.read_text().splitlines())
    lost = []
    for line in FRAGMENT.read_text().splitlines():
        line = line.strip()
        if line.startswith("CONFIG_") and line.endswith("=y") and line not in have:
            lost.append(line)
    if lost:
        raise LinuxBuildError(f"{config}: Kconfig dropped {', '.join(lost)} from {FRAGMENT.name} (an unmet dependency)", "build")
