"""Run a command as it would run in Gradescope's container: `python gradescope_container.py
ROOT -- COMMAND...` (as root, Linux).

Gradescope grades in a Docker container: root without CAP_SYS_ADMIN (Docker's default
capabilities), read-only cgroups, a pid namespace of its own, /autograder world-readable as the
zip unpacks it. This script builds the same on this machine, in new mount and pid namespaces
(`unshare`), so nothing of it reaches the host:

1. every cgroup file system is remounted read-only;
2. the folders above the interpreter, the venv, the grader and ROOT that an unprivileged user
   cannot enter (this machine keeps Python under /root, mode 0700; Gradescope's image under
   /opt) are covered by a tmpfs of mode 0755 that holds only what is needed below them;
3. the command runs with Docker's default capabilities only (`setpriv --bounding-set`), so
   bubblewrap cannot make namespaces and no tmpfs can be mounted, as in the container.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DOCKER_CAPABILITIES = ("chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap",
                       "net_bind_service", "net_raw", "sys_chroot", "mknod", "audit_write", "setfcap")
INSIDE = "--inside"


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def read_only_cgroups() -> None:
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for point in points:
        if point == "/sys/fs/cgroup" or point.startswith("/sys/fs/cgroup/"):
            _mount("-o", "remount,bind,ro", point)


def _closed(folder: Path) -> bool:
    return not folder.stat().st_mode & 0o001


def open_ways(needed: list[Path]) -> None:
    """Cover each folder above a needed path that others cannot enter with a 0755 tmpfs that
    holds the original of each needed child (bound back), top-down."""
    holder = Path("/mnt")  # a tmpfs of this mount namespace's: nothing is left on the host
    _mount("-t", "tmpfs", "-o", "mode=0700,size=1m", "tmpfs", str(holder))
    for path in needed:
        for folder in list(reversed(path.parents))[1:]:
            if not _closed(folder):
                continue
            children = sorted({p.relative_to(folder).parts[0] for p in needed if folder in p.parents})
            saved = []
            for child in children:
                keep = holder / f"{len(list(holder.iterdir()))}"
                keep.mkdir()
                _mount("--bind", str(folder / child), str(keep))
                saved.append((child, keep))
            _mount("-t", "tmpfs", "-o", "mode=0755,size=1m", "tmpfs", str(folder))
            for child, keep in saved:
                (folder / child).mkdir()
                _mount("--bind", str(keep), str(folder / child))


def inside(root: Path, command: list[str]) -> None:
    import grader

    read_only_cgroups()
    open_ways([Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(),
               Path(grader.__file__).resolve().parent, root.resolve()])
    caps = ",".join(["-all", *(f"+{c}" for c in DOCKER_CAPABILITIES)])
    os.execvp("setpriv", ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", "--", *command])


def main(argv: list[str]) -> None:
    if argv[0] == INSIDE:
        inside(Path(argv[1]), argv[3:])
        return
    root, command = argv[0], argv[2:]
    os.execvp("unshare", ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private",
                          sys.executable, __file__, INSIDE, root, "--", *command])


if __name__ == "__main__":
    main(sys.argv[1:])
