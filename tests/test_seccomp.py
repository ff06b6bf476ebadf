"""The seccomp layer (grader/sandbox/seccomp.py): the filter program, then the filter in a real kernel.

A. The program, without any kernel: well-formed as the kernel's checker demands, and what it
   decides for every call, judged by a small classic-BPF interpreter below on both arches
   (so aarch64 is tested on an x86_64 machine too); the syscall tables against the kernel headers
   where they are installed.
B. The program loaded into a forked child of this process (prctl(PR_SET_SECCOMP) through ctypes):
   refused calls fail with EPERM, ordinary ones work, calls from another ABI are refused; a shared
   futex wait returns EAGAIN without sleeping while private futexes, threads and JAX work.
C. Inside a sandboxed kernel (bubblewrap loads the filter): every refused call fails with EPERM
   while JAX and ordinary Python work in the same kernel, and two kernels share no key ring, no
   file lock and no futex.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from grader.kernel.client import Kernel
from grader.kernel.protocol import MIME_TYPE
from grader.report import Isolation
from grader.sandbox import seccomp
from grader.sandbox.layers import LAYERS, SECCOMP_FD, Sandbox, SandboxPolicy, available

ISOLATION = available()
POLICY = SandboxPolicy()
NATIVE = seccomp.native_arch()
CELL_TIMEOUT = 60.0
EPERM, ENOSYS, ALLOW = (seccomp.errno_action(errno.EPERM), seccomp.errno_action(errno.ENOSYS),
                        seccomp.SECCOMP_RET_ALLOW)
EAGAIN = seccomp.errno_action(errno.EAGAIN)

# Calls every filter must allow: what the kernel, JAX, setpriv (setresuid, setgroups, capset,
# prctl) and bubblewrap's last steps need. (futex is allowed by its op: see the futex tests.)
ALLOWED = {
    "x86_64": {"read": 0, "write": 1, "openat": 257, "close": 3, "mmap": 9, "mprotect": 10, "munmap": 11,
               "brk": 12, "rt_sigaction": 13, "ioctl": 16, "getpid": 39, "sched_yield": 24, "fork": 57,
               "vfork": 58, "execve": 59, "exit_group": 231, "wait4": 61, "kill": 62,
               "setresuid": 117, "setresgid": 119, "setgroups": 116, "capget": 125, "capset": 126,
               "prctl": 157, "arch_prctl": 158, "setsid": 112, "epoll_wait": 232, "getrandom": 318,
               "seccomp": 317, "rseq": 334, "pidfd_open": 434, "close_range": 436,
               "mbind": 237, "set_robust_list": 273, "prlimit64": 302, "pipe2": 293, "statx": 332},
    "aarch64": {"read": 63, "write": 64, "openat": 56, "close": 57, "mmap": 222, "mprotect": 226,
                "munmap": 215, "brk": 214, "rt_sigaction": 134, "ioctl": 29, "getpid": 172,
                "sched_yield": 124, "execve": 221, "exit_group": 94, "wait4": 260, "kill": 129,
                "setresuid": 147, "setresgid": 149, "setgroups": 159, "capget": 90,
                "capset": 91, "prctl": 167, "setsid": 157, "epoll_pwait": 22, "getrandom": 278,
                "seccomp": 277, "rseq": 293, "pidfd_open": 434,
                "close_range": 436, "mbind": 235, "set_robust_list": 99, "prlimit64": 261,
                "pipe2": 59, "statx": 291},
}
FOREIGN_ARCH = {"x86_64": 0x40000003, "aarch64": 0x40000028}  # AUDIT_ARCH_I386, AUDIT_ARCH_ARM


def needs_seccomp_layer() -> pytest.MarkDecorator:
    missing = [layer for layer in ("namespaces", "user", "seccomp") if layer not in ISOLATION.layers]
    why = "; ".join(f"{layer}: {ISOLATION.missing.get(layer, 'missing')}" for layer in missing)
    return pytest.mark.skipif(bool(missing), reason=f"sandbox layer missing on this machine ({why})")


# ============================================================================= A. the program


def run_filter(code: bytes, arch_id: int, nr: int, *args: int) -> int:
    """What the program returns for one call: a classic-BPF interpreter of the subset it uses."""
    values = [a & 0xFFFFFFFFFFFFFFFF for a in args] + [0] * (6 - len(args))
    data = struct.pack("=iIQ6Q", nr, arch_id, 0x1000, *values)
    insns = seccomp.instructions(code)
    pc, acc, steps = 0, 0, 0
    while True:
        steps += 1
        assert steps <= len(insns), "the program loops"  # it cannot: jumps go forward only
        op, jt, jf, k = insns[pc]
        if op == seccomp.LD_ABS:
            (acc,) = struct.unpack_from("=I", data, k)
            pc += 1
        elif op & 0x07 == seccomp.BPF_JMP:
            test = {seccomp.BPF_JEQ: acc == k, seccomp.BPF_JGT: acc > k, seccomp.BPF_JGE: acc >= k,
                    seccomp.BPF_JSET: bool(acc & k)}[op & 0xF0]
            pc += 1 + (jt if test else jf)
        else:
            assert op == seccomp.BPF_RET | seccomp.BPF_K
            return k


@pytest.fixture(params=seccomp.ARCHES)
def arch(request: pytest.FixtureRequest) -> str:
    return request.param


def decide(arch: str, name: str, *args: int) -> int:
    nr = {**ALLOWED[arch], **seccomp.numbers(arch)}[name]
    return run_filter(seccomp.program(arch), seccomp.AUDIT_ARCH[arch], nr, *args)


def test_the_program_is_well_formed(arch: str) -> None:
    code = seccomp.program(arch)
    seccomp.check(code)  # raises on anything the kernel's checker would refuse
    insns = seccomp.instructions(code)
    assert len(code) == 8 * len(insns) and 40 < len(insns) < 300
    assert insns[0] == (seccomp.LD_ABS, 0, 0, seccomp.ARCH_OFFSET)  # the arch is checked first
    for index, (op, jt, jf, k) in enumerate(insns):
        if op & 0x07 == seccomp.BPF_JMP:
            assert index + 1 + max(jt, jf) < len(insns)
        if op == seccomp.BPF_RET | seccomp.BPF_K:
            assert k in (ALLOW, EPERM, ENOSYS, EAGAIN)
    assert seccomp.program(arch) == code  # deterministic


@pytest.mark.parametrize("broken, why", [
    (b"", "whole number"),
    (b"\x06\x00\x00\x00\x00\x00\xff\x7f" + b"\x00", "whole number"),
    (struct.pack("=HBBI", seccomp.LD_ABS, 0, 0, 64), "outside seccomp_data"),
    (struct.pack("=HBBI", seccomp.LD_ABS, 0, 0, 2) + struct.pack("=HBBI", 6, 0, 0, 0),
     "outside seccomp_data"),
    (struct.pack("=HBBI", 0x15, 1, 0, 0) + struct.pack("=HBBI", 6, 0, 0, 0), "past the end"),
    (struct.pack("=HBBI", 0x07, 0, 0, 0) + struct.pack("=HBBI", 6, 0, 0, 0), "opcode"),
    (struct.pack("=HBBI", seccomp.LD_ABS, 0, 0, 0), "does not return"),
])
def test_the_checker_refuses_malformed_programs(broken: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        seccomp.check(broken)


def test_a_jump_out_of_range_is_not_assembled() -> None:
    asm = seccomp.Assembler()
    far = asm.label()
    asm.jump(seccomp.BPF_JEQ, 1, far, None)
    for _ in range(300):
        asm.ret(ALLOW)
    asm.place(far)
    asm.ret(EPERM)
    with pytest.raises(ValueError, match="out of range"):
        asm.assemble()


def test_every_listed_call_is_refused_and_everything_else_allowed(arch: str) -> None:
    code, arch_id, numbers = seccomp.program(arch), seccomp.AUDIT_ARCH[arch], seccomp.numbers(arch)
    refused = {numbers[name] for name in seccomp.DENIED if name in numbers}
    checked = {numbers[name] for name in seccomp.CHECKED}
    enosys = {numbers[name] for name in seccomp.ENOSYS_CALLS}
    for nr in range(600):  # every number the arch has, and then some
        verdict = run_filter(code, arch_id, nr)
        if nr in enosys:
            assert verdict == ENOSYS  # clone3: glibc falls back to clone; futex_waitv: flags in memory
        elif nr in refused:
            assert verdict == EPERM, nr
        elif nr not in checked:
            assert verdict == ALLOW, nr
    for name in ALLOWED[arch]:
        assert decide(arch, name, 0, 0, 0) == ALLOW, name
    for name in ("add_key", "keyctl", "request_key", "ptrace", "mount", "umount2", "unshare", "setns",
                 "bpf", "perf_event_open", "process_vm_readv", "process_vm_writev", "kexec_load",
                 "kexec_file_load", "init_module", "finit_module", "delete_module", "userfaultfd",
                 "io_uring_setup", "io_uring_enter", "io_uring_register", "flock", "inotify_init1",
                 "fanotify_init", "cachestat", "pivot_root", "chroot", "open_tree", "fsopen", "fsmount"):
        assert decide(arch, name) == EPERM, name
    if arch == "x86_64":
        assert decide(arch, "inotify_init") == EPERM


def test_the_syscall_tables_hold_no_duplicate(arch: str) -> None:
    numbers = seccomp.numbers(arch)
    assert len(set(numbers.values())) == len(numbers)
    assert set(seccomp.DENIED) | set(seccomp.CHECKED) == set(seccomp.SYSCALLS)
    assert not set(ALLOWED[arch].values()) & set(numbers.values())


HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
           "aarch64": Path("/usr/include/asm-generic/unistd.h")}


def test_the_syscall_tables_match_the_kernel_headers(arch: str) -> None:
    header = HEADERS[arch]
    if not header.is_file():
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    pattern = r"#define __NR(?:3264)?_(\w+)\s+(\d+)\b"
    defined = {m[1]: int(m[2]) for m in re.finditer(pattern, header.read_text())}
    numbers = seccomp.numbers(arch)
    compared = {name for name in numbers if name in defined}
    assert len(compared) > 0.8 * len(numbers)  # a header older than the newest calls lacks those
    assert {name: numbers[name] for name in compared} == {name: defined[name] for name in compared}
    for name in set(seccomp.SYSCALLS) - set(numbers):  # absent on this arch: absent in its header
        assert name not in defined, name


def test_another_abi_and_x32_numbers_are_refused(arch: str) -> None:
    code = seccomp.program(arch)
    for nr in (0, 20, 39, 172, 999):  # i386 getpid is 20: nothing of another ABI gets through
        assert run_filter(code, FOREIGN_ARCH[arch], nr) == EPERM
    if arch == "x86_64":
        for nr in (0, 1, 39, 512, 0x3FFFFFFF):
            assert run_filter(code, seccomp.AUDIT_ARCH[arch], nr | seccomp.X32_SYSCALL_BIT) == EPERM
        assert run_filter(code, seccomp.AUDIT_ARCH[arch], -1) == EPERM  # 0xffffffff, x32 bit set


def test_fcntl_record_locks_leases_and_dnotify_are_refused(arch: str) -> None:
    for cmd in (5, 6, 7, 12, 13, 14, 36, 37, 38, 1024, 1026):  # F_GETLK... F_OFD_SETLKW, F_SETLEASE, F_NOTIFY
        assert decide(arch, "fcntl", 3, cmd, 0) == EPERM, cmd
        assert decide(arch, "fcntl", 3, cmd | 1 << 32, 0) == EPERM, cmd  # the kernel reads 32 bits
    for cmd in (0, 1, 2, 3, 4, 8, 9, 1025, 1030, 1031, 1032, 1033, 1034):  # F_DUPFD, F_GETFD, ..., seals
        assert decide(arch, "fcntl", 3, cmd, 0) == ALLOW, cmd


def test_clone_with_namespace_flags_and_odd_personalities_are_refused(arch: str) -> None:
    thread = 0x3D0F00  # CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
    assert decide(arch, "clone", thread) == ALLOW
    assert decide(arch, "clone", 0x01200011) == ALLOW  # fork(): SIGCHLD|CHILD_SETTID|CHILD_CLEARTID
    assert decide(arch, "clone", 0x4111) == ALLOW  # posix_spawn: CLONE_VM|CLONE_VFORK|SIGCHLD
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
        assert decide(arch, "clone", thread | flag) == EPERM, hex(flag)
    assert decide(arch, "clone3", 0, 88) == ENOSYS
    for persona in (0, 8, 0x20000, 0x20008, 0xFFFFFFFF):
        assert decide(arch, "personality", persona) == ALLOW, persona
    for persona in (0x0040000, 0x0400000, 0x10, 0xFFFFFFFE):  # ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC...
        assert decide(arch, "personality", persona) == EPERM, persona


def test_vsock_and_page_cache_probes_are_refused(arch: str) -> None:
    assert decide(arch, "socket", 40, 1, 0) == EPERM  # AF_VSOCK
    for family in (1, 2, 10, 16):  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
        assert decide(arch, "socket", family, 1, 0) == ALLOW
    assert decide(arch, "preadv2", 3, 0, 1, 0, 0, 0x8) == EPERM  # RWF_NOWAIT: is it cached?
    assert decide(arch, "preadv2", 3, 0, 1, 0, 0, 0x1) == ALLOW  # RWF_HIPRI
    assert decide(arch, "cachestat", 3, 0, 0, 0) == EPERM


FUTEX_COMMANDS = range(14)  # FUTEX_WAIT (0) ... FUTEX_LOCK_PI2 (13)
ADDRESS = 0x7F0000001000


def test_a_private_futex_is_allowed_whatever_its_command(arch: str) -> None:
    for cmd in FUTEX_COMMANDS:
        for op in (cmd | 128, cmd | 128 | 256, cmd | 128 | 1 << 32):  # FUTEX_PRIVATE_FLAG (+ CLOCK_REALTIME)
            assert decide(arch, "futex", ADDRESS, op, 0, 0, 0, 0) == ALLOW, hex(op)
    assert decide(arch, "futex", ADDRESS, 0xFFFFFFFF, 0) == ALLOW  # the kernel's own ENOSYS


def test_a_shared_futex_only_wakes_and_a_shared_wait_never_sleeps(arch: str) -> None:
    """Without FUTEX_PRIVATE_FLAG a futex on a file page is keyed by the inode: a wait answers
    EAGAIN at once (glibc and libstdc++ read the word again: they spin), a wake is allowed (nobody
    can be waiting), anything else is refused."""
    waits = (0, 9, 9 | 256, 11, 11 | 256)  # FUTEX_WAIT, _WAIT_BITSET (+ CLOCK_REALTIME), _WAIT_REQUEUE_PI
    wakes = (1, 10, 3, 4, 5)  # FUTEX_WAKE, _WAKE_BITSET, _REQUEUE, _CMP_REQUEUE, _WAKE_OP
    for op in waits:
        assert decide(arch, "futex", ADDRESS, op, 7, 0, 0, 0xFFFFFFFF) == EAGAIN, op
        assert decide(arch, "futex", ADDRESS, op | 1 << 32, 7) == EAGAIN, op  # the kernel reads an int
        assert decide(arch, "futex", ADDRESS, op | 128 << 32, 7) == EAGAIN, op  # no private flag there
    for op in wakes:
        assert decide(arch, "futex", ADDRESS, op, 1000, 0, 0, 0) == ALLOW, op
    refused = set(FUTEX_COMMANDS) - set(waits) - set(wakes)  # FUTEX_FD, the PI commands
    assert refused == {2, 6, 7, 8, 12, 13}
    for op in (*refused, 256, 1 | 256, 13 | 256, 0x200, 0xFFFFFF7F):
        assert decide(arch, "futex", ADDRESS, op, 0, 0, 0, 0) == EPERM, hex(op)


def test_futex2_needs_the_private_flag_and_futex_waitv_and_requeue_answer_enosys(arch: str) -> None:
    u32 = 0x02  # FUTEX2_SIZE_U32
    for flags in (u32 | 128, u32 | 128 | 1 << 32, 128, 0x83):
        assert decide(arch, "futex_wake", ADDRESS, 0xFFFFFFFF, 1, flags) == ALLOW, hex(flags)
        assert decide(arch, "futex_wait", ADDRESS, 7, 0xFFFFFFFF, flags, 0, 1) == ALLOW, hex(flags)
    for flags in (u32, 0, 0x03, 128 << 32 | u32, 0xFFFFFF7F):
        assert decide(arch, "futex_wake", ADDRESS, 0xFFFFFFFF, 1, flags) == EPERM, hex(flags)
        assert decide(arch, "futex_wait", ADDRESS, 7, 0xFFFFFFFF, flags, 0, 1) == EPERM, hex(flags)
    assert decide(arch, "futex_wake", ADDRESS, 0xFFFFFFFF, 128, u32) == EPERM  # the flags are args[3]
    for args in ((ADDRESS, 1, 0, 0, 1), (ADDRESS, 1, 128, 0, 1), (0, 0, 0, 0, 0)):
        assert decide(arch, "futex_waitv", *args) == ENOSYS
        assert decide(arch, "futex_requeue", *args[:4]) == ENOSYS


def test_the_filter_file_is_written_once_where_only_root_can_enter(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if NATIVE is None:
        pytest.skip(f"no syscall table for {os.uname().machine}")
    real = seccomp.private_directory()  # the shared one: checked, never changed here
    info = real.stat()
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()
    assert real.name == f"grader-seccomp-{os.geteuid()}"
    assert seccomp.filter_file().parent == real

    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setattr(seccomp, "private_directory", lambda: private)
    monkeypatch.setattr(seccomp, "_written", {})
    path = seccomp.filter_file()
    assert path.parent == private and path.read_bytes() == seccomp.program(NATIVE)
    assert stat.S_IMODE(path.stat().st_mode) == 0o400
    mtime = path.stat().st_mtime_ns
    assert seccomp.filter_file() == path and path.stat().st_mtime_ns == mtime  # once per process
    path.chmod(0o600)
    path.write_bytes(b"\x06\x00\x00\x00\x00\x00\xff\x7f")  # changed behind its back: written again
    assert seccomp.filter_file() == path and path.read_bytes() == seccomp.program(NATIVE)
    path.unlink()  # removed (a cleaner of temporary files): written again
    assert seccomp.filter_file() == path and path.read_bytes() == seccomp.program(NATIVE)
    assert sorted(p.name for p in private.iterdir()) == [path.name]  # no partial file is left


def test_a_private_directory_held_by_someone_else_is_not_used(tmp_path: Path) -> None:
    """The directory's name is predictable: one that is not this user's own, 0700 directory (made
    by another user, or a link) is passed over for a fresh one."""
    bases = (tmp_path / "missing", tmp_path)
    assert seccomp.private_directory(bases) == tmp_path / f"grader-seccomp-{os.geteuid()}"  # made
    squatted = tmp_path / f"grader-seccomp-{os.geteuid()}"
    os.chmod(squatted, 0o777)
    chosen = seccomp.private_directory(bases)
    assert chosen != squatted and chosen.parent == tmp_path
    assert stat.S_IMODE(chosen.stat().st_mode) == 0o700
    if os.geteuid() == 0:  # another user's own 0700 directory
        os.chmod(squatted, 0o700)
        os.chown(squatted, 65534, 65534)
        assert seccomp.private_directory(bases) != squatted
    squatted.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    squatted.symlink_to(tmp_path / "elsewhere")
    assert seccomp.private_directory(bases) not in (squatted, tmp_path / "elsewhere")


def test_the_layer_is_detected_and_recorded() -> None:
    reason = seccomp.unavailable_reason()
    assert "seccomp" in LAYERS
    if reason is None and "namespaces" in ISOLATION.layers:
        assert "seccomp" in ISOLATION.layers
    else:
        assert "seccomp" in ISOLATION.missing


def test_wrap_hands_the_filter_to_bubblewrap_on_a_fixed_fd(tmp_path: Path) -> None:
    if NATIVE is None:
        pytest.skip(f"no syscall table for {os.uname().machine}")
    connection = str(tmp_path / "connection.json")
    kernel_argv = [sys.executable, "-m", "ipykernel_launcher", "-f", connection]
    sandbox = Sandbox(tmp_path, POLICY, Isolation(sandboxed=True, layers=list(LAYERS)))
    argv = sandbox.wrap(list(kernel_argv), connection)
    assert argv[:2] == ["/bin/sh", "-c"]
    script, filter_path = argv[2], argv[5]
    assert argv[3:5] == ["grader-sandbox", connection]
    assert f'exec {SECCOMP_FD}<"$2"' in script and script.endswith('shift 2; exec "$@"')
    assert Path(filter_path) == seccomp.filter_file() and not Path(filter_path).is_relative_to(tmp_path)
    bwrap, setpriv = argv.index("bwrap"), argv.index("setpriv")
    assert argv[bwrap:setpriv].count("--seccomp") == 1
    assert argv[argv.index("--seccomp") + 1] == str(SECCOMP_FD)
    without = Isolation(sandboxed=False, layers=[layer for layer in LAYERS if layer != "seccomp"])
    argv = Sandbox(tmp_path, POLICY, without).wrap(list(kernel_argv), connection)
    assert "--seccomp" not in argv and "<" not in argv[2]


# ============================================================================= B. loaded here

# A fresh interpreter (not a fork of this one: JAX may have threads here) loads the native filter
# with prctl, then reports what a few calls did.
CHILD = r"""
import ctypes, errno, json, mmap, os, struct, subprocess, sys, threading
from grader.sandbox import seccomp

arch, locked = seccomp.native_arch(), sys.argv[1]
nr = seccomp.numbers(arch)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

def call(number, *args):
    converted = [ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a) for a in args]
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *converted)
    return "ok" if result != -1 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

def int_0x80(number):
    # through the i386 entry from this 64-bit process, in a child: without ia32 emulation it
    # would die of SIGSEGV
    pid = os.fork()
    if pid == 0:
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(bytes([0xB8, *number.to_bytes(4, "little"), 0xCD, 0x80, 0xC3]))  # mov eax; int 0x80; ret
        function = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
        os._exit(function() & 0xFF)
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status):
        return "no ia32 emulation"
    code = os.WEXITSTATUS(status)
    return code - 256 if code > 127 else code

facts = {"i386_getpid_before": int_0x80(20) == os.getpid() % 256 if arch == "x86_64" else None}
code = seccomp.program(arch)
buffer = ctypes.create_string_buffer(code, len(code))
fprog = SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0):  # NO_NEW_PRIVS, SECCOMP
    print(json.dumps({"load": errno.errorcode[ctypes.get_errno()]}))
    sys.exit()
fd = os.open(locked, os.O_RDONLY)
flock = struct.pack("=hhqqi4x", 0, 0, 0, 0, 0)  # F_RDLCK over the whole file
facts.update({
    "load": "ok",
    "add_key": call(nr["add_key"], b"user", b"grader-test", b"1", 1, -4),  # into @u
    "keyctl": call(nr["keyctl"], 0, -4, 0),  # KEYCTL_GET_KEYRING_ID of @u
    "flock": call(nr["flock"], fd, 1 | 4),  # LOCK_SH | LOCK_NB
    "fcntl_setlk": call(nr["fcntl"], fd, 6, flock),
    "fcntl_getfd": call(nr["fcntl"], fd, 1),
    "inotify": call(nr["inotify_init1"], 0),
    "unshare": call(nr["unshare"], 0),
    "clone3": call(nr["clone3"], 0, 0),
    "getpid": libc.syscall(ctypes.c_long(39 if arch == "x86_64" else 172)) == os.getpid(),
})
thread = threading.Thread(target=lambda: None)  # clone3 is refused: glibc falls back to clone
thread.start()
thread.join()
facts["subprocess"] = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
                                     text=True).stdout.strip()
if arch == "x86_64":
    facts["x32_getpid"] = call(39 | seccomp.X32_SYSCALL_BIT)
    facts["i386_getpid"] = int_0x80(20)  # i386's getpid
print(json.dumps(facts))
"""


@pytest.mark.skipif(NATIVE is None or not sys.platform.startswith("linux"), reason="no seccomp filter here")
def test_loaded_in_a_child_the_filter_refuses_add_key_and_allows_getpid(tmp_path: Path,
                                                                        repo_root: Path) -> None:
    locked = tmp_path / "lock"
    locked.write_text("x")
    out = subprocess.run([sys.executable, "-c", CHILD, str(locked)], capture_output=True, text=True,
                         cwd=repo_root, timeout=60)
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    assert facts["load"] == "ok", facts
    for name in ("add_key", "keyctl", "flock", "fcntl_setlk", "inotify", "unshare"):
        assert facts[name] == "EPERM", (name, facts[name])
    assert facts["clone3"] == "ENOSYS"
    assert facts["getpid"] is True and facts["fcntl_getfd"] == "ok" and facts["subprocess"] == "42"
    if NATIVE == "x86_64":
        assert facts["x32_getpid"] == "EPERM"
        if facts["i386_getpid_before"]:  # the kernel runs i386 calls: the filter refuses them
            assert facts["i386_getpid"] == -errno.EPERM


# The same, for futexes: a futex on a page of a read-only file, shared and private, and the
# threads, pools, locks and JAX compilations that use futexes (some of them shared ones).
FUTEX_CHILD = r"""
import concurrent.futures, ctypes, errno, json, multiprocessing, os, queue, sys, threading, time
from grader.sandbox import seccomp

arch = seccomp.native_arch()
nr = seccomp.numbers(arch)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]

class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]

def call(number, *args):
    # [the result or the errno name, the seconds it took]
    start = time.monotonic()
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    took = round(time.monotonic() - start, 3)
    return [result if result != -1 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()), took]

fd = os.open(sys.argv[1], os.O_RDONLY)
page = libc.mmap(None, 4096, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED: a page of the page cache
word = ctypes.c_uint32.from_address(page).value
anon = ctypes.c_uint32(0)
relative = Timespec(0, 300_000_000)  # FUTEX_WAIT's timeout is relative: 0.3 s
T, FUTEX = ctypes.addressof(relative), nr["futex"]
facts = {"before_shared_wait": call(FUTEX, page, 0, word, T)}  # it sleeps 0.3 s: ETIMEDOUT

code = seccomp.program(arch)
buffer = ctypes.create_string_buffer(code, len(code))
fprog = SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0):  # NO_NEW_PRIVS, SECCOMP
    print(json.dumps({"load": errno.errorcode[ctypes.get_errno()]}))
    sys.exit()
facts.update({
    "load": "ok",
    "shared_wait": call(FUTEX, page, 0, word, T),  # FUTEX_WAIT
    "shared_wait_bitset": call(FUTEX, page, 9 | 256, word, T, 0, 0xFFFFFFFF),
    "shared_wake": call(FUTEX, page, 1, 1000),  # FUTEX_WAKE
    "private_wait": call(FUTEX, page, 0 | 128, word, T),  # it sleeps: ETIMEDOUT
    "private_wake": call(FUTEX, page, 1 | 128, 1000),
    "shared_lock_pi": call(FUTEX, ctypes.addressof(anon), 6, 0, 0),  # FUTEX_LOCK_PI
    "private_lock_pi": call(FUTEX, ctypes.addressof(anon), 6 | 128, 0, 0),
    "private_unlock_pi": call(FUTEX, ctypes.addressof(anon), 7 | 128, 0, 0),
    # futex2 (Linux 6.7+: ENOSYS before): the flags are args[3]; FUTEX2_SIZE_U32 = 2
    "futex2_shared_wake": call(nr["futex_wake"], page, 0xFFFFFFFF, 1, 2),
    "futex2_private_wake": call(nr["futex_wake"], page, 0xFFFFFFFF, 1, 2 | 128),
    "futex2_shared_wait": call(nr["futex_wait"], page, word ^ 1, 0xFFFFFFFF, 2, 0, 1),
    "futex2_private_wait": call(nr["futex_wait"], page, word ^ 1, 0xFFFFFFFF, 2 | 128, 0, 1),
    "futex_waitv": call(nr["futex_waitv"], 0, 0, 0, 0, 1),  # the kernel: EINVAL
    "futex_requeue": call(nr["futex_requeue"], 0, 0, 1, 0),
})

# threads: glibc's pthread_join waits with a shared futex (it spins now)
for _ in range(100):
    thread = threading.Thread(target=time.sleep, args=(0.001,))
    thread.start()
    thread.join()
slow = threading.Thread(target=time.sleep, args=(0.2,))
slow.start()
slow.join()
lock, count = threading.Lock(), [0]
def work():
    for _ in range(20000):
        with lock:
            count[0] += 1
workers = [threading.Thread(target=work) for _ in range(4)]
for thread in workers:
    thread.start()
for thread in workers:
    thread.join()
q = queue.Queue()
threading.Thread(target=lambda: [q.put(i) for i in range(1000)]).start()
event = threading.Event()
start = time.monotonic()
facts.update({
    "counter": count[0],
    "queue": sum(q.get() for _ in range(1000)),
    "event_timeout": [event.wait(0.2), round(time.monotonic() - start, 3)],
})
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    facts["pool"] = sum(pool.map(lambda i: i * i, range(100)))

# a multiprocessing lock is a POSIX semaphore: a shared futex. Contended, it spins until released.
mp_lock = multiprocessing.Lock()
mp_lock.acquire()
got = []
waiter = threading.Thread(target=lambda: got.append(mp_lock.acquire(timeout=10)))
waiter.start()
time.sleep(0.3)
mp_lock.release()
waiter.join()
facts["mp_lock"] = got

import jax, jax.numpy as jnp  # XLA's JIT waits on a std::future: a shared FUTEX_WAIT
f = jax.jit(lambda x, y: jnp.tanh(x @ y).sum())
x = jnp.arange(12.0).reshape(3, 4) / 10
facts["jit"] = [float(f(x, x.T)), float(jnp.tanh(x @ x.T).sum())]
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    facts["jax_threads"] = sorted(pool.map(lambda i: float(jax.jit(lambda v: v * i)(jnp.ones(8)).sum()), range(4)))
print(json.dumps(facts))
"""


@pytest.mark.kernel
@pytest.mark.skipif(NATIVE is None or not sys.platform.startswith("linux"), reason="no seccomp filter here")
def test_loaded_in_a_child_a_shared_futex_never_sleeps_and_threads_and_jax_work(repo_root: Path) -> None:
    out = subprocess.run([sys.executable, "-c", FUTEX_CHILD, venv_file()], capture_output=True, text=True,
                         cwd=repo_root, timeout=120)
    assert out.returncode == 0, out.stderr  # glibc aborts on an unexpected futex error (EPERM)
    facts = json.loads(out.stdout)
    assert facts["load"] == "ok", facts
    assert facts["before_shared_wait"][0] == "ETIMEDOUT"  # without the filter the wait slept
    # a shared wait answers EAGAIN at once, without sleeping; a shared wake finds nobody
    assert facts["shared_wait"][0] == "EAGAIN" and facts["shared_wait"][1] < 0.2
    assert facts["shared_wait_bitset"][0] == "EAGAIN"
    assert facts["shared_wake"][0] == 0
    assert facts["shared_lock_pi"][0] == "EPERM"
    # the private futexes reach the kernel: the wait sleeps its 0.3 s
    assert facts["private_wait"][0] == "ETIMEDOUT" and facts["private_wait"][1] >= 0.25
    assert facts["private_wake"][0] == 0
    assert facts["private_lock_pi"][0] == 0 and facts["private_unlock_pi"][0] == 0
    if facts["futex2_private_wake"][0] != "ENOSYS":  # Linux 6.7+
        assert facts["futex2_private_wake"][0] == 0 and facts["futex2_private_wait"][0] == "EAGAIN"
    assert facts["futex2_shared_wake"][0] == "EPERM" and facts["futex2_shared_wait"][0] == "EPERM"
    assert facts["futex_waitv"][0] == "ENOSYS" and facts["futex_requeue"][0] == "ENOSYS"
    # threads, locks, queues, pools, a timed event, a contended multiprocessing lock and JAX work
    assert facts["counter"] == 80000 and facts["queue"] == 499500 and facts["pool"] == 328350
    assert facts["event_timeout"][0] is False and facts["event_timeout"][1] >= 0.15
    assert facts["mp_lock"] == [True]
    assert facts["jit"][0] == pytest.approx(facts["jit"][1])
    assert facts["jax_threads"] == [0.0, 8.0, 16.0, 24.0]


# ============================================================================= C. in a kernel

PRELUDE = '''
import ctypes, errno, json, os, struct
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
NR = params["nr"]

def sys_call(name, *args):
    """'ok' or the errno name of a raw system call."""
    converted = [ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a) for a in args]
    ctypes.set_errno(0)
    result = _libc.syscall(ctypes.c_long(NR[name] if isinstance(name, str) else name), *converted)
    return "ok" if result != -1 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
'''


def observe(kernel: Kernel, body: str, **params: Any) -> dict[str, Any]:
    """Run `body` (which sets a dict `facts`) in the kernel; return the facts it published."""
    params["nr"] = {**ALLOWED[NATIVE], **seccomp.numbers(NATIVE)} if NATIVE else {}
    code = (f"params = __import__('json').loads({json.dumps(params)!r})\n" + PRELUDE + textwrap.dedent(body)
            + f"\nget_ipython().display_pub.publish(data={{{MIME_TYPE!r}: facts}}, metadata={{}})\n")
    run = kernel.run(code, CELL_TIMEOUT, observations=True)
    assert run.status == "ok", f"the cell failed: {run.status} {run.ename}: {run.evalue}"
    (facts,) = run.observations
    return facts


@pytest.fixture(scope="module")
def kernel() -> Iterator[Kernel]:
    with Kernel(sandbox=POLICY) as k:
        yield k


def venv_file() -> str:
    """A file every kernel can read and none can write: the venv's configuration."""
    path = Path(sys.prefix) / "pyvenv.cfg"
    return str(path if path.is_file() else Path(sys.executable).resolve())


REFUSED_CELL = '''
import subprocess, sys, time

facts = {}
fd = os.open(params["venv_file"], os.O_RDONLY)
lock = struct.pack("=hhqqi4x", 0, 0, 0, 0, 0)  # struct flock: F_RDLCK over the whole file
attr = struct.pack("=II", 1, 128) + bytes(120)  # perf_event_attr: PERF_TYPE_SOFTWARE, cpu-clock
child = subprocess.Popen(["sleep", "30"])  # a process it could trace
facts = {
    "add_key": sys_call("add_key", b"user", b"grader-channel", b"1", 1, -4),  # into @u
    "keyctl": sys_call("keyctl", 0, -4, 0),  # KEYCTL_GET_KEYRING_ID of @u
    "request_key": sys_call("request_key", b"user", b"grader-channel", 0, 0),
    "ptrace": sys_call("ptrace", 16, child.pid, 0, 0),  # PTRACE_ATTACH
    "mount": sys_call("mount", b"none", b"/tmp", b"tmpfs", 0, 0),
    "umount2": sys_call("umount2", b"/tmp", 0),
    "unshare": sys_call("unshare", 0),  # a no-op without the filter
    "unshare_user": sys_call("unshare", 0x10000000),  # CLONE_NEWUSER
    "setns": sys_call("setns", os.open("/proc/self/ns/uts", os.O_RDONLY), 0),
    "bpf": sys_call("bpf", 0, 0, 0),
    "perf_event_open": sys_call("perf_event_open", attr, 0, -1, -1, 0),
    "flock": sys_call("flock", fd, 1 | 4),  # LOCK_SH | LOCK_NB
    "fcntl_setlk": sys_call("fcntl", fd, 6, lock),  # F_SETLK
    "fcntl_getlk": sys_call("fcntl", fd, 5, lock),  # F_GETLK
    "fcntl_ofd_setlk": sys_call("fcntl", fd, 37, lock),  # F_OFD_SETLK
    "fcntl_notify": sys_call("fcntl", os.open("/tmp", os.O_RDONLY), 1026, 1),  # F_NOTIFY, DN_ACCESS
    "inotify_init1": sys_call("inotify_init1", 0),
    "fanotify_init": sys_call("fanotify_init", 0, 0),
    "userfaultfd": sys_call("userfaultfd", 0),
    "io_uring_setup": sys_call("io_uring_setup", 1, bytes(120)),
    "process_vm_readv": sys_call("process_vm_readv", child.pid, 0, 0, 0, 0, 0),
    "personality": sys_call("personality", 0x0040000),  # ADDR_NO_RANDOMIZE
    "vsock": sys_call("socket", 40, 1, 0),
    "cachestat": sys_call("cachestat", fd, 0, 0, 0),
    "memfd_create": sys_call("memfd_create", b"held", 0),
}
if "inotify_init" in NR:
    facts["inotify_init"] = sys_call("inotify_init")
facts["clone3"] = sys_call("clone3", 0, 0)
facts["personality_query"] = sys_call("personality", 0xFFFFFFFF)
facts["fcntl_getfl"] = sys_call("fcntl", fd, 3)
try:
    __import__("fcntl").lockf(fd, 1 | 4)
    facts["lockf_py"] = "ok"
except OSError as exc:
    facts["lockf_py"] = errno.errorcode[exc.errno]
child.kill()
child.wait()
with open("/proc/self/status") as f:
    status = dict(line.rstrip("\\n").split(":\\t", 1) for line in f if ":\\t" in line)
with open("/proc/1/status") as f:
    init_status = dict(line.rstrip("\\n").split(":\\t", 1) for line in f if ":\\t" in line)
facts["seccomp"] = status["Seccomp"], status.get("Seccomp_filters")
facts["init_seccomp"] = init_status["Seccomp"]
facts["uid"] = os.getuid()
fds = {}
for name in os.listdir("/proc/self/fd"):
    try:
        fds[name] = os.readlink(f"/proc/self/fd/{name}")
    except OSError:
        pass
facts["fds"] = fds
'''

REFUSED = ("add_key", "keyctl", "request_key", "ptrace", "mount", "umount2", "unshare", "unshare_user",
           "setns", "bpf", "perf_event_open", "flock", "fcntl_setlk", "fcntl_getlk", "fcntl_ofd_setlk",
           "fcntl_notify", "inotify_init1", "fanotify_init", "userfaultfd", "io_uring_setup",
           "process_vm_readv", "personality", "vsock", "cachestat", "memfd_create")


@pytest.mark.kernel
@needs_seccomp_layer()
def test_every_refused_call_fails_with_eperm_inside_the_sandbox(kernel: Kernel) -> None:
    facts = observe(kernel, REFUSED_CELL, venv_file=venv_file())
    refused = {name: facts[name] for name in REFUSED + (("inotify_init",) if "inotify_init" in facts else ())}
    assert refused == {name: "EPERM" for name in refused}
    assert facts["lockf_py"] == "EPERM"  # what Python's fcntl.lockf meets
    assert facts["clone3"] == "ENOSYS"
    assert facts["personality_query"] == "ok" and facts["fcntl_getfl"] == "ok"
    # the filter is on the kernel and on bwrap's pid-1 init; setpriv ran under it
    assert facts["seccomp"] == ["2", "1"]
    assert facts["init_seccomp"] == "2"
    assert facts["uid"] == POLICY.uid
    # bwrap read and closed the filter's fd: the kernel holds nothing of it
    leaked = {fd: target for fd, target in facts["fds"].items() if "grader-seccomp" in target}
    assert leaked == {}


ORDINARY_CELL = '''
import concurrent.futures, sqlite3, subprocess, sys

import jax
import jax.numpy as jnp

facts = {}
f = jax.jit(lambda x, y: jnp.tanh(x @ y).sum())
x = jnp.arange(12.0).reshape(3, 4) / 10
facts["jit"] = float(f(x, x.T))
facts["expected"] = float(jnp.tanh(x @ x.T).sum())
facts["grad"] = float(jax.grad(lambda v: (v ** 2).sum())(jnp.ones(3)).sum())
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    facts["threads"] = sorted(pool.map(lambda i: float(jnp.full((8,), i).sum()), range(4)))
db = sqlite3.connect(":memory:")
db.execute("create table t (x)")
db.executemany("insert into t values (?)", [(i,) for i in range(5)])
facts["sqlite"] = db.execute("select sum(x) from t").fetchone()[0]
facts["subprocess"] = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
                                     text=True, check=True).stdout.strip()
facts["shell"] = subprocess.run("echo $((1 + 1))", shell=True, capture_output=True, text=True).stdout.strip()
with open("/tmp/seccomp-test.txt", "w") as out:
    out.write("written")
with open("/tmp/seccomp-test.txt") as back:
    facts["tmp"] = back.read()
r, w = os.pipe()
os.write(w, b"p")
facts["pipe"] = os.read(r, 1).decode()
facts["getpid"] = sys_call("getpid")
'''


@pytest.mark.kernel
@needs_seccomp_layer()
def test_jax_and_ordinary_python_work_in_the_same_kernel(kernel: Kernel) -> None:
    facts = observe(kernel, ORDINARY_CELL)
    assert facts["jit"] == pytest.approx(facts["expected"])
    assert facts["grad"] == 6.0
    assert facts["threads"] == [0.0, 8.0, 16.0, 24.0]
    assert facts["sqlite"] == 10
    assert facts["subprocess"] == "42" and facts["shell"] == "2"
    assert facts["tmp"] == "written" and facts["pipe"] == "p" and facts["getpid"] == "ok"


CHANNEL_CELL = '''
facts = {"add_key": sys_call("add_key", b"user", b"grader-channel-" + params["token"].encode(), b"1", 1, -4),
         "search": sys_call("keyctl", 10, -4, b"user", b"grader-channel-" + params["token"].encode(), 0),
         "flock": sys_call("flock", os.open(params["venv_file"], os.O_RDONLY), 2 | 4)}  # LOCK_EX|LOCK_NB
'''


@pytest.mark.kernel
@needs_seccomp_layer()
def test_two_kernels_cannot_signal_through_the_key_ring_or_a_lock() -> None:
    """Kernel A tries to leave a key in the shared user key ring and to hold a lock on a venv file;
    kernel B, side by side, tries to find the key. Every step is refused."""
    token = os.urandom(4).hex()
    with Kernel(sandbox=POLICY) as first, Kernel(sandbox=POLICY) as second:
        sent = observe(first, CHANNEL_CELL, token=token, venv_file=venv_file())
        received = observe(second, CHANNEL_CELL, token=token, venv_file=venv_file())
    assert sent == {"add_key": "EPERM", "search": "EPERM", "flock": "EPERM"}
    assert received == sent


FUTEX_SETUP_CELL = '''
import concurrent.futures, threading, time
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]

class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]

def futex(number, *args):
    """[the result or the errno name, the seconds it took] of a raw futex call"""
    start = time.monotonic()
    ctypes.set_errno(0)
    result = _libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    took = round(time.monotonic() - start, 3)
    return [result if result != -1 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()), took]

page = _libc.mmap(None, 4096, 1, 1, os.open(params["venv_file"], os.O_RDONLY), 0)  # PROT_READ, MAP_SHARED
word = ctypes.c_uint32.from_address(page).value
waited = {}
def wait(name, op, seconds):
    timeout = Timespec(seconds, 0)  # relative
    waited[name] = futex(NR["futex"], page, op, word, ctypes.addressof(timeout))
receivers = [threading.Thread(target=wait, args=("shared", 0, 4)),  # FUTEX_WAIT
             threading.Thread(target=wait, args=("private", 128, 2))]  # FUTEX_WAIT_PRIVATE
facts = {"mapped": page not in (None, 2 ** 64 - 1)}
'''

FUTEX_RECEIVE_CELL = '''
for receiver in receivers:
    receiver.start()
facts = {"started": True}
'''

FUTEX_SEND_CELL = '''
facts = {"shared_wake": futex(NR["futex"], page, 1, 1000)[0],  # FUTEX_WAKE: how many it woke
         "private_wake": futex(NR["futex"], page, 1 | 128, 1000)[0],
         "futex2_shared_wake": futex(NR["futex_wake"], page, 0xFFFFFFFF, 1000, 2)[0],  # FUTEX2_SIZE_U32
         "futex2_private_wake": futex(NR["futex_wake"], page, 0xFFFFFFFF, 1000, 2 | 128)[0]}
'''

FUTEX_COLLECT_CELL = '''
for receiver in receivers:
    if receiver.ident is not None:  # started (in kernel A only)
        receiver.join(10)
import jax, jax.numpy as jnp
f = jax.jit(lambda x, y: jnp.tanh(x @ y).sum())
x = jnp.arange(12.0).reshape(3, 4) / 10
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    in_threads = sorted(pool.map(lambda i: float(jax.jit(lambda v: v * i)(jnp.ones(8)).sum()), range(4)))
facts = {"waited": waited, "jit": [float(f(x, x.T)), float(jnp.tanh(x @ x.T).sum())], "threads": in_threads}
'''


@pytest.mark.kernel
@needs_seccomp_layer()
def test_two_kernels_cannot_signal_through_a_futex_on_a_shared_file() -> None:
    """Kernel A waits on a futex in a page of a read-only venv file that kernel B maps too, once
    shared (keyed by the file: the channel) and once private; B wakes both. A's shared wait returns
    EAGAIN at once instead of sleeping, B's wakes find nobody, A's private wait sleeps its full
    timeout; JAX (jit, in threads) and the kernels keep working."""
    with Kernel(sandbox=POLICY) as first, Kernel(sandbox=POLICY) as second:
        for kernel in (first, second):
            assert observe(kernel, FUTEX_SETUP_CELL, venv_file=venv_file()) == {"mapped": True}
        observe(first, FUTEX_RECEIVE_CELL)
        time.sleep(0.5)
        sent = observe(second, FUTEX_SEND_CELL)
        received = observe(first, FUTEX_COLLECT_CELL)
        assert observe(second, FUTEX_COLLECT_CELL)["jit"] == received["jit"]
    assert sent["shared_wake"] == 0 and sent["private_wake"] == 0  # nobody waits where B can reach
    assert sent["futex2_shared_wake"] == "EPERM"
    assert sent["futex2_private_wake"] in (0, "ENOSYS")  # ENOSYS: a kernel before Linux 6.7
    waited = received["waited"]
    assert waited["shared"][0] == "EAGAIN" and waited["shared"][1] < 0.5  # it never slept
    assert waited["private"][0] == "ETIMEDOUT" and waited["private"][1] >= 1.9  # not woken by B
    assert received["jit"][0] == pytest.approx(received["jit"][1])
    assert received["threads"] == [0.0, 8.0, 16.0, 24.0]


def test_the_verifier_s_filter_leaves_futexes_alone_and_refuses_the_rest() -> None:
    """The verifier runs no student code that makes system calls, so the futex channel is not
    open to it and its compiler threads need not spin; every other refusal stays."""
    kernel = seccomp.program(NATIVE)
    verifier = seccomp.program(NATIVE, shared_futexes=True)
    assert kernel != verifier
    seccomp.check(verifier)
    assert seccomp.filter_file(shared_futexes=True) != seccomp.filter_file()
