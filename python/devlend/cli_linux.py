"""``devlend linux ...``: the User-Mode Linux guest kernel (``devlend linux build``)."""

from __future__ import annotations

from typing import Optional

import typer

from .errors import DevlendError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Real Linux guests (User-Mode Linux) on devlend.")


@app.command("build")
def build_cmd(source: Optional[str] = typer.Option(None, "--source", help="a Linux 6.6+ source tree (default: Debian's linux-source-6.12, installed where we are root)"),
              jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="parallel make jobs (default: all cores)")) -> None:
    """Build the UML guest kernel (or reuse the cached one) and print its path."""
    from .cli import _fail, err, out
    from .linux.build import build
    try:
        path = build(source, jobs, log=lambda s: err.print(f"devlend: {s}", markup=False))
    except (DevlendError, OSError) as e:
        _fail(e)
    out.print(str(path), markup=False)


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run_cmd(ctx: typer.Context,
            topology: str = typer.Option(..., "--topology", help="the topology file"),
            host: list[str] = typer.Option(..., "--host", help="the host the guest is; repeat it for several guests on one clock, each running the commands"),
            device: list[str] = typer.Option([], "--device", help="an NVMe drive for the guest's PCI (borrowed when it sits in another host); the engine is then the guest's clock. With several hosts: HOST=DEVICE, repeated, a drive or the host's NTB adapter (an Intel Xeon gen1 NTB)"),
            out_dir: Optional[str] = typer.Option(None, "--out", help="the folder for the console and each command's output (default: a new temporary one)"),
            timeout_s: float = typer.Option(300.0, "--timeout", help="wall-clock seconds before a guest that never powers off is ended")) -> None:
    """Boot a guest for HOST and run the commands after `--` in it, each a shell command line:
    `devlend linux run --topology T.yaml --host borrower --device nvme0 -- "nvme list" "fio ..."`.
    Prints each command's output; exits with the first failing command's status."""
    from . import load
    from .cli import _fail, out
    from .linux.guest import run
    commands = list(ctx.args)
    if not commands:
        _fail(DevlendError("no commands: give them after `--`, each one shell command line"))
    if len(host) > 1:
        return _run_several(load, topology, host, commands, device, out_dir, timeout_s)
    if len(device) > 1:
        _fail(DevlendError(f"--device {' '.join(device)}: one guest takes one drive"))
    try:
        r = run(load(topology), host[0], commands, device=device[0] if device else None, outdir=out_dir, timeout_s=timeout_s)
    except (DevlendError, OSError) as e:
        _fail(e)
    for c, o, rc in zip(commands, r.outputs, r.returncodes):
        out.print(f"$ {c}   (exit {rc})", markup=False)
        out.print(o.rstrip("\n"), markup=False)
    if r.device:
        out.print(f"# simulated: {r.device['guest_ns'] / 1e6:.3f} ms; console: {r.console}", markup=False)
    bad = next((rc for rc in r.returncodes if rc != 0), 0)
    if bad:
        raise typer.Exit(bad)


def _run_several(load, topology: str, hosts: list[str], commands: list[str], device: list[str], out_dir, timeout_s: float) -> None:
    """Several guests on one clock, each running ``commands``: each one's outputs, under its name."""
    from .cli import _fail, out
    from .linux.guest import run_guests
    if len(set(hosts)) != len(hosts):
        _fail(DevlendError(f"--host {' '.join(hosts)}: each host once"))
    devices: dict[str, list[str]] = {}
    for d in device:
        h, sep, name = d.partition("=")
        if not sep or not h or not name:
            _fail(DevlendError(f"--device {d}: with several hosts, expected HOST=DEVICE (e.g. a=ntb-a)"))
        devices.setdefault(h, []).append(name)
    try:
        rs = run_guests(load(topology), {h: commands for h in hosts}, devices=devices, outdir=out_dir, timeout_s=timeout_s)
    except (DevlendError, OSError) as e:
        _fail(e)
    for h, r in rs.items():
        for c, o, rc in zip(commands, r.outputs, r.returncodes):
            out.print(f"[{h}] $ {c}   (exit {rc})", markup=False)
            out.print(o.rstrip("\n"), markup=False)
        out.print(f"[{h}] # simulated: {r.device['guest_ns'] / 1e6:.3f} ms; console: {r.console}", markup=False)
    bad = next((rc for r in rs.values() for rc in r.returncodes if rc != 0), 0)
    if bad:
        raise typer.Exit(bad)
