"""scripts/step, which runs each step of the README's test command (scripts/test): the command's
exit status passed on, a line saying how each step ended (which one failed, its CPU and peak
memory), and Ctrl-C reaching the command, not only the wrapper."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STEP = str(Path(__file__).parent.parent / "scripts" / "step")


def step(name: str, code: str, tmp_path: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, DEVLEND_TEST_STEPS=str(tmp_path / "steps"))
    return subprocess.Popen([STEP, name, sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_a_step_passes_on_its_exit_status_and_says_which_step_failed(tmp_path):
    p = step("lints", "import sys; sys.exit(3)", tmp_path)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 3
    assert err.startswith("scripts/test: lints: FAILED (exit status 3): ")
    assert (tmp_path / "steps").read_text().startswith("lints: FAILED (exit status 3): ")


def test_a_step_reports_the_peak_memory_of_its_largest_process(tmp_path):
    p = step("alloc", "b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096])", tmp_path)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0
    line = (tmp_path / "steps").read_text()
    assert line.startswith("alloc: ok: ")
    peak = int(line.split("peak memory ")[1].split(" MB")[0])
    assert 200 <= peak < 400, line


def test_ctrl_c_stops_the_command_and_the_step_still_says_how_it_ended(tmp_path):
    """Ctrl-C sends SIGINT to the step's whole process group: the command starts with SIGINT at
    its default (Python's KeyboardInterrupt), although the wrapper itself ignores it."""
    code = "import time; print('ready', flush=True); time.sleep(60)"
    p = step("pytest", code, tmp_path, start_new_session=True)
    assert p.stdout.readline() == "ready\n"
    start = time.monotonic()
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert time.monotonic() - start < 20
    assert p.returncode == 128 + signal.SIGINT
    assert "scripts/test: pytest: FAILED (killed by SIGINT): " in err
