"""The seccomp layer of the sandbox: a system-call denylist, as a classic BPF program.

Every kernel runs as the same unprivileged user, so whatever the kernel keeps per user (the key
ring) or per file (locks, inotify watches) would be a channel between two submissions graded
side by side or one after the other. The namespaces close most channels; this filter closes the
ones they leave open, and refuses what Docker's default profile refuses to a container without
capabilities (mounts, namespaces, tracing, BPF, perf, module and kexec loading, io_uring, ...).

The program is assembled here, with no dependency: `program()` returns the bytes of an array of
`struct sock_filter`, which bubblewrap loads (`bwrap --seccomp FD`) just before it executes the
command, in its own pid-1 init as well. What it does, in order:

    1. a call from another ABI (i386 via `int 0x80`, or arm32 compat) is refused: EPERM;
    2. on x86_64, a syscall number with the x32 bit (0x40000000) is refused: EPERM;
    3. `clone3` returns ENOSYS (its flags are in memory, out of a filter's reach), so glibc falls
       back to `clone`, whose flags are checked: any namespace flag is refused; so do
       `futex_waitv` and `futex_requeue`, whose futex flags are in memory too;
    4. `fcntl` with a record-lock, lease or dnotify command, `personality` with other than the
       usual personas, `socket(AF_VSOCK)` and `preadv2(RWF_NOWAIT)` (a page-cache probe) are
       refused; `futex` is allowed with FUTEX_PRIVATE_FLAG, and without it (a shared futex) only
       to wake: a shared wait returns EAGAIN at once, as if the word had changed (see
       `FUTEX_SHARED_WAITS`); `futex_wake` and `futex_wait` need FUTEX2_PRIVATE;
    5. every call in `DENIED` is refused (a binary search over the syscall numbers); the rest is
       allowed.

Arguments are compared on their low 32 bits, which are all the kernel reads of an `int` or
`unsigned int` argument (fcntl's command, personality, the socket family, futex's op and futex2's
flags), so high bits cannot hide a refused value; clone's namespace flags are all in the low 32
bits too.

Only x86_64 and aarch64 have syscall tables here; elsewhere the layer is reported missing.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import os
import platform
import shutil
import stat
import struct
import sys
import tempfile
from pathlib import Path

from grader.atomic import write_atomic

# ------------------------------------------------------------------ kernel ABI constants

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # EM_* | __AUDIT_ARCH_64BIT | _LE
X32_SYSCALL_BIT = 0x40000000

SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000

# classic BPF opcodes (linux/bpf_common.h)
BPF_LD, BPF_JMP, BPF_RET = 0x00, 0x05, 0x06
BPF_W, BPF_ABS, BPF_K = 0x00, 0x20, 0x00
BPF_JEQ, BPF_JGT, BPF_JGE, BPF_JSET = 0x10, 0x20, 0x30, 0x40
LD_ABS = BPF_LD | BPF_W | BPF_ABS
BPF_MAXINSNS = 4096

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
NR_OFFSET, ARCH_OFFSET, ARGS_OFFSET, DATA_SIZE = 0, 4, 16, 64
SOCK_FILTER = struct.Struct("=HBBI")  # u16 code, u8 jt, u8 jf, u32 k


def arg_low(index: int) -> int:
    """Offset of the low 32 bits of args[index] (both supported arches are little-endian)."""
    return ARGS_OFFSET + 8 * index


# fcntl commands (asm-generic/fcntl.h, linux/fcntl.h; the same on x86_64 and aarch64)
F_GETLK, F_SETLK, F_SETLKW = 5, 6, 7
F_GETLK64, F_SETLK64, F_SETLKW64 = 12, 13, 14  # 32-bit ABIs only; refused all the same
F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
F_SETLEASE, F_NOTIFY = 1024, 1026  # a lease break and dnotify tell one process of another's open
FCNTL_REFUSED = (F_GETLK, F_SETLK, F_SETLKW, F_GETLK64, F_SETLK64, F_SETLKW64,
                 F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE, F_NOTIFY)

# CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |
# CLONE_NEWNET: Docker's mask too
CLONE_NAMESPACE_FLAGS = 0x7E020000
# PER_LINUX, PER_LINUX32, UNAME26, PER_LINUX32|UNAME26, and the query 0xffffffff (Docker's list)
PERSONALITY_ALLOWED = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
AF_UNIX = 1
AF_NETLINK = 16  # libzmq lists the interfaces (read-only without CAP_NET_ADMIN) and aborts if refused
AF_VSOCK = 40  # not network-namespaced: it would reach the host of a virtual machine
RWF_NOWAIT = 0x8

# futex (linux/futex.h). A futex on a page of a file (any mapping of a shared read-only venv or
# /usr file) gets a key made of the inode and offset unless the op has FUTEX_PRIVATE_FLAG: two
# kernels that map the same file meet on it, and FUTEX_WAIT/FUTEX_WAKE need only read access, so
# one kernel's wake reports how many of the other's threads waited (a two-way channel). A private
# futex is keyed by the caller's address space: no other process can reach it.
FUTEX_PRIVATE_FLAG, FUTEX_CLOCK_REALTIME = 128, 256
FUTEX_WAIT, FUTEX_WAKE, FUTEX_REQUEUE, FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP = 0, 1, 3, 4, 5
FUTEX_WAIT_BITSET, FUTEX_WAKE_BITSET, FUTEX_WAIT_REQUEUE_PI = 9, 10, 11
# Shared futexes are not rare: glibc's pthread_join waits on the thread's tid with a shared
# FUTEX_WAIT_BITSET (the kernel's CLONE_CHILD_CLEARTID wake is shared), libstdc++'s std::future
# (XLA's LLVM JIT waits on one) with a shared FUTEX_WAIT, and glibc aborts the process when a wait
# fails with an error it does not expect (EPERM: "The futex facility returned an unexpected error
# code"). So a shared wait is answered EAGAIN, the "the word has changed" answer that every caller
# handles by reading the word again: the caller spins instead of sleeping, and no thread of any
# sandbox ever sleeps on a shared key. A shared wake is then allowed: there is nobody to wake (glibc
# aborts when a wake fails with other than EFAULT or EINVAL). Each shared op is matched exactly, with
# or without FUTEX_CLOCK_REALTIME where the kernel accepts it; any other shared op (the PI ones, the
# removed FUTEX_FD, unknown commands) is refused with EPERM.
FUTEX_SHARED_WAITS = (FUTEX_WAIT, FUTEX_WAIT_BITSET, FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME,
                      FUTEX_WAIT_REQUEUE_PI, FUTEX_WAIT_REQUEUE_PI | FUTEX_CLOCK_REALTIME)
FUTEX_SHARED_WAKES = (FUTEX_WAKE, FUTEX_WAKE_BITSET, FUTEX_REQUEUE, FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP)
# futex2 (Linux 6.7+): futex_wake(uaddr, mask, nr, flags) and futex_wait(uaddr, val, mask, flags,
# timeout, clockid) take their flags in args[3]; nothing here uses them, so the shared kind is
# refused. futex_waitv and futex_requeue read each futex's flags from user memory: ENOSYS.
FUTEX2_PRIVATE = FUTEX_PRIVATE_FLAG
FUTEX2_FLAGS_ARG = 3

# ------------------------------------------------------------------ syscall numbers

# name -> (x86_64, aarch64); None where the call does not exist on that arch. Checked against
# arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h.
SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    # with argument checks
    "fcntl": (72, 25),
    "clone": (56, 220),
    "clone3": (435, 435),
    "personality": (135, 92),
    "socket": (41, 198),
    "preadv2": (327, 286),
    "futex": (202, 98),
    "futex_wake": (454, 454),
    "futex_wait": (455, 455),
    "futex_waitv": (449, 449),
    "futex_requeue": (456, 456),
    # channels between kernels of the same user
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "flock": (73, 32),
    "inotify_init": (253, None),
    "inotify_init1": (294, 26),
    "fanotify_init": (300, 262),
    "cachestat": (451, 451),
    # IPC objects outlive their process in the ipc namespace, which the children of a fork
    # server share one after the other (grader/sandbox/forking.py)
    "shmget": (29, 194),
    "semget": (64, 190),
    "msgget": (68, 186),
    "mq_open": (240, 180),
    # memory no process maps: a memfd's pages are in no process's RSS, which is all a sandbox
    # without a memory cgroup can watch (24 memfds of 250 MiB, never mapped, held 6 GiB past
    # the rootless sandbox's 4 GiB bound); secret memory is in none either
    "memfd_create": (319, 279),
    "memfd_secret": (447, 447),
    # other processes' memory and files
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "process_madvise": (440, 440),
    "kcmp": (312, 272),
    "pidfd_getfd": (438, 438),
    "migrate_pages": (256, 238),
    "move_pages": (279, 239),
    # namespaces and mounts
    "unshare": (272, 97),
    "setns": (308, 268),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    # the kernel itself
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "create_module": (174, None),
    "uselib": (134, None),
    "_sysctl": (156, None),
    "syslog": (103, 116),
    "lookup_dcookie": (212, 18),
    "open_by_handle_at": (304, 265),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "nfsservctl": (180, 42),
    "acct": (163, 89),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "vhangup": (153, 58),
    "iopl": (172, None),
    "ioperm": (173, None),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
}
ARCHES = ("x86_64", "aarch64")

CHECKED = ("fcntl", "clone", "clone3", "personality", "socket", "preadv2", "futex", "futex_wake",
           "futex_wait", "futex_waitv", "futex_requeue")
ENOSYS_CALLS = ("clone3", "futex_waitv", "futex_requeue")  # their flags are in memory: ENOSYS
DENIED = tuple(name for name in SYSCALLS if name not in CHECKED)  # refused whatever the arguments


def numbers(arch: str) -> dict[str, int]:
    """name -> syscall number on `arch`, for the calls that exist there."""
    column = ARCHES.index(arch)
    return {name: nrs[column] for name, nrs in SYSCALLS.items() if nrs[column] is not None}


def native_arch() -> str | None:
    """The arch of this interpreter's system calls, if it has a table here."""
    machine = platform.machine().lower()
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(machine)
    if arch is None or sys.byteorder != "little" or struct.calcsize("P") != 8:
        return None  # e.g. a 32-bit interpreter on a 64-bit kernel: its calls are another ABI
    return arch


def unavailable_reason() -> str | None:
    """Why this machine cannot have the layer (None: it can)."""
    if not sys.platform.startswith("linux"):
        return f"not Linux ({sys.platform})"
    if native_arch() is None:
        bits = struct.calcsize("P") * 8
        return f"no syscall table for this architecture ({platform.machine()}, {bits}-bit)"
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return "cannot read /proc/self/status"
    if "Seccomp:" not in status:
        return "the kernel has no seccomp support (CONFIG_SECCOMP)"
    return None


# Where bubblewrap cannot run (a container that refuses namespaces), the privileged wrapper
# loads the filter itself: this interpreter, started isolated and without site, reads the
# filter from `fd`, sets no_new_privs, loads it, and executes the rest of the command (setpriv,
# then the kernel), which inherits it. Its own calls (read, close, prctl, execve) are allowed.
LOADER = '''
import ctypes, os, sys
fd = int(sys.argv[1])
code = b""
while chunk := os.read(fd, 65536):
    code += chunk
os.close(fd)
class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
libc = ctypes.CDLL(None, use_errno=True)
program = Program(len(code) // 8, code)
if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(program), 0, 0):
    sys.exit("grader-seccomp: the filter could not be loaded: " + os.strerror(ctypes.get_errno()))
os.execvp(sys.argv[2], sys.argv[2:])
'''


def loader_command(fd: int) -> list[str]:
    """The command that loads the filter open on `fd`, then runs the arguments after it."""
    return [sys.executable, "-I", "-S", "-c", LOADER, str(fd)]


# ------------------------------------------------------------------ assembler


class Assembler:
    """Classic BPF with labels: jump targets are label names (None: the next instruction)."""

    def __init__(self) -> None:
        self._code: list[tuple[int, str | None, str | None, int]] = []
        self._labels: dict[str, int] = {}
        self._fresh = 0

    def label(self, name: str | None = None) -> str:
        """A new label name (not placed yet)."""
        self._fresh += 1
        return f"{name or 'L'}.{self._fresh}"

    def place(self, name: str) -> None:
        assert name not in self._labels, name
        self._labels[name] = len(self._code)

    def load(self, offset: int) -> None:
        assert 0 <= offset < DATA_SIZE and offset % 4 == 0, offset
        self._code.append((LD_ABS, None, None, offset))

    def jump(self, op: int, k: int, jt: str | None, jf: str | None) -> None:
        self._code.append((BPF_JMP | op | BPF_K, jt, jf, k & 0xFFFFFFFF))

    def ret(self, value: int) -> None:
        self._code.append((BPF_RET | BPF_K, None, None, value))

    def assemble(self) -> bytes:
        out = []
        for index, (code, jt, jf, k) in enumerate(self._code):
            out.append(SOCK_FILTER.pack(code, self._offset(index, jt), self._offset(index, jf), k))
        return b"".join(out)

    def _offset(self, index: int, target: str | None) -> int:
        if target is None:
            return 0
        offset = self._labels[target] - index - 1
        if not 0 <= offset <= 255:  # classic BPF jumps only forward, by at most 255
            raise ValueError(f"jump from {index} to {target} is out of range ({offset})")
        return offset


def errno_action(code: int) -> int:
    return SECCOMP_RET_ERRNO | (code & 0xFFFF)


DENY = errno_action(errno.EPERM)
AGAIN = errno_action(errno.EAGAIN)  # a shared futex wait: "the word changed", read it again


def program(arch: str, *, shared_futexes: bool = False, local_sockets_only: bool = False) -> bytes:
    """The filter for `arch`, as bytes of `struct sock_filter` (what `bwrap --seccomp` reads).

    `shared_futexes=True` leaves the `futex` call alone: for the verifier, which runs no student
    code that could make system calls (an XLA program cannot), so the futex channel is not open
    to it, and its compiler threads need not spin.

    `local_sockets_only=True` refuses every socket but a unix or netlink one: for a sandbox
    without its own network namespace (a container that refuses namespaces), where the network
    is the host's. The kernel talks to the grader over unix sockets (jupyter's ipc transport)."""
    nr = numbers(arch)
    asm = Assembler()
    checked = [name for name in CHECKED if not (shared_futexes and name == "futex")]
    special = {name: asm.label(name) for name in checked if name in nr}
    enosys, tree = asm.label("enosys"), asm.label("tree")

    # 1. the arch (ABI) of the call; 2. the x32 bit
    asm.load(ARCH_OFFSET)
    foreign = asm.label("foreign")
    asm.jump(BPF_JEQ, AUDIT_ARCH[arch], None, foreign)
    asm.load(NR_OFFSET)
    if arch == "x86_64":
        asm.jump(BPF_JGE, X32_SYSCALL_BIT, foreign, None)
    # 3./4. calls whose arguments decide
    names = list(special)
    for i, name in enumerate(names):
        last = i == len(names) - 1
        asm.jump(BPF_JEQ, nr[name], enosys if name in ENOSYS_CALLS else special[name],
                 tree if last else None)

    allow = SECCOMP_RET_ALLOW
    blocks = {  # name -> (argument, [(test, values, action on a match), ...], action otherwise)
        "fcntl": (1, [(BPF_JEQ, FCNTL_REFUSED, DENY)], allow),
        "clone": (0, [(BPF_JSET, (CLONE_NAMESPACE_FLAGS,), DENY)], allow),
        "personality": (0, [(BPF_JEQ, PERSONALITY_ALLOWED, allow)], DENY),
        "socket": ((0, [(BPF_JEQ, (AF_UNIX, AF_NETLINK), allow)], DENY) if local_sockets_only
                   else (0, [(BPF_JEQ, (AF_VSOCK,), DENY)], allow)),
        "preadv2": (5, [(BPF_JSET, (RWF_NOWAIT,), DENY)], allow),
        "futex": (1, [(BPF_JSET, (FUTEX_PRIVATE_FLAG,), allow), (BPF_JEQ, FUTEX_SHARED_WAKES, allow),
                      (BPF_JEQ, FUTEX_SHARED_WAITS, AGAIN)], DENY),
        "futex_wake": (FUTEX2_FLAGS_ARG, [(BPF_JSET, (FUTEX2_PRIVATE,), allow)], DENY),
        "futex_wait": (FUTEX2_FLAGS_ARG, [(BPF_JSET, (FUTEX2_PRIVATE,), allow)], DENY),
    }
    for name, (arg, rules, otherwise) in blocks.items():
        if name not in special:
            continue
        asm.place(special[name])
        asm.load(arg_low(arg))
        targets = [asm.label("match") for _ in rules]
        for (test, values, _), target in zip(rules, targets):
            for value in values:
                asm.jump(test, value, target, None)
        asm.ret(otherwise)
        for (_, _, action), target in zip(rules, targets):
            asm.place(target)
            asm.ret(action)

    asm.place(foreign)
    asm.ret(DENY)
    asm.place(enosys)
    asm.ret(errno_action(errno.ENOSYS))

    # 5. a binary search over the refused numbers, each leaf with its own returns (short jumps)
    asm.place(tree)
    _search(asm, sorted(nr[name] for name in DENIED if name in nr))
    code = asm.assemble()
    check(code)
    return code


def _search(asm: Assembler, values: list[int]) -> None:
    if len(values) <= 4:
        deny = asm.label("deny")
        for value in values:
            asm.jump(BPF_JEQ, value, deny, None)
        asm.ret(SECCOMP_RET_ALLOW)
        asm.place(deny)
        asm.ret(DENY)
        return
    middle = len(values) // 2
    upper = asm.label("ge")
    asm.jump(BPF_JGE, values[middle], upper, None)
    _search(asm, values[:middle])
    asm.place(upper)
    _search(asm, values[middle:])


def instructions(code: bytes) -> list[tuple[int, int, int, int]]:
    return [SOCK_FILTER.unpack_from(code, i) for i in range(0, len(code), SOCK_FILTER.size)]


def check(code: bytes) -> None:
    """What the kernel's checker demands of a seccomp program (raises ValueError otherwise):
    a whole number of instructions, at most BPF_MAXINSNS; only aligned 32-bit loads inside
    seccomp_data, jumps and returns; every jump lands inside; the last instruction returns."""
    if not code or len(code) % SOCK_FILTER.size:
        raise ValueError("not a whole number of sock_filter instructions")
    insns = instructions(code)
    if len(insns) > BPF_MAXINSNS:
        raise ValueError(f"{len(insns)} instructions, more than {BPF_MAXINSNS}")
    for index, (op, jt, jf, k) in enumerate(insns):
        if op == LD_ABS:
            if k % 4 or k >= DATA_SIZE:
                raise ValueError(f"instruction {index}: load outside seccomp_data ({k})")
        elif op & 0x07 == BPF_JMP and op & 0xF8 in (BPF_JEQ, BPF_JGT, BPF_JGE, BPF_JSET):
            if index + 1 + max(jt, jf) >= len(insns):
                raise ValueError(f"instruction {index}: jump past the end")
        elif op != BPF_RET | BPF_K:
            raise ValueError(f"instruction {index}: opcode {op:#x} is not used by this filter")
    if insns[-1][0] != BPF_RET | BPF_K:
        raise ValueError("the last instruction does not return")


# ------------------------------------------------------------------ the file bubblewrap reads

_written: dict[tuple[bool, bool], Path] = {}  # filter files this process wrote or checked, by kind


def filter_file(*, shared_futexes: bool = False, local_sockets_only: bool = False) -> Path:
    """The native filter as a file, for the sandbox's privileged wrapper to open for bubblewrap.

    It lives in a directory only root (the grader) can enter, never in a kernel's scratch, under a
    name made of its content's hash: written once, atomically, by the first grader process that
    needs it and checked by each later one, so no process has to remove it (`grade` ends with
    os._exit, which runs no clean-up)."""
    arch = native_arch()
    if arch is None:
        raise RuntimeError("no seccomp filter for this architecture")
    kind = (shared_futexes, local_sockets_only)
    code = program(arch, shared_futexes=shared_futexes, local_sockets_only=local_sockets_only)
    known = _written.get(kind)
    if known is not None and _holds(known, code):
        return known
    directory = private_directory()
    path = directory / f"{arch}-{hashlib.sha256(code).hexdigest()[:16]}.bpf"
    if not _holds(path, code):
        write_atomic(path, code, mode=0o400)
    _written[kind] = path
    return path


def _holds(path: Path, code: bytes) -> bool:
    try:
        return path.read_bytes() == code
    except OSError:
        return False


def private_directory(bases: tuple[Path, ...] | None = None) -> Path:
    """`grader-seccomp-<uid>` in /run (or the temporary directory), if it is this user's own and
    nobody else's (mode 0700, not a link); otherwise a fresh one, removed at exit."""
    uid = os.geteuid()
    bases = bases or (Path("/run"), Path(tempfile.gettempdir()))
    for base in bases:
        candidate = base / f"grader-seccomp-{uid}"
        try:
            os.mkdir(candidate, 0o700)
        except FileExistsError:
            pass
        except OSError:
            continue
        info = os.lstat(candidate)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == uid and stat.S_IMODE(info.st_mode) == 0o700:
            return candidate
    directory = Path(tempfile.mkdtemp(prefix="grader-seccomp-", dir=bases[-1]))  # the name is taken
    atexit.register(shutil.rmtree, directory, True)
    return directory
