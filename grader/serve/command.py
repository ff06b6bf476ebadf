"""`grade serve OUT -a ASSIGNMENT --roster FILE`: the hand-in service, started by one command.

It checks what it can before it binds a port (the host's sandbox, as a batch does; the
assignment; the roster and its tokens; that OUT is the gradebook of this assignment and no other
grade command is updating it), then takes OUT's lock for its whole run, puts back in the queue
the hand-ins a stopped run left running, binds the port, prints one line with the address, and
serves with uvicorn in this one process: the grading workers are its children
(grader/serve/backends.py). A host that is not a loopback address needs `--public`, which says
a TLS proxy is in front (docs/hand-in-service.md): tokens and notebooks must not cross a network
in clear. Ctrl-C or SIGTERM stops it: the workers and their kernels are killed, running hand-ins
go back to the queue, and the outputs are rebuilt once more.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from grader.errors import UsageError
from grader.inert import PATH_LIMIT, terminal

DEFAULT_PORT = 8000


def _parser(parser: type[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = parser(prog="grade serve", description="Serve hand-ins for one assignment: students hand in with their "
               "token (grade tokens) and get the verdict from warm workers; OUT is the batch folder the hand-ins "
               "are graded into (its gradebook, reports, summary, class page and exports).")
    p.add_argument("outdir", type=Path, metavar="OUT", help="the batch folder (created if needed)")
    p.add_argument("-a", "--assignment", required=True, help="the assignment handed in (an id or a folder)")
    p.add_argument("--roster", type=Path, required=True, help="who may hand in: the roster tokens were issued from")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="hand-ins graded at once (default 1)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="grade on the workers of this Dask scheduler "
                   "(tcp://HOST:8786) instead of this machine's: as many at once as they have threads")
    p.add_argument("--rate", type=float, default=6.0, metavar="PER_MINUTE",
                   help="hand-ins a student may make per minute (default 6)")
    p.add_argument("--burst", type=int, default=3, help="hand-ins a student may make at once (default 3)")
    p.add_argument("--origin", action="append", default=[], metavar="URL",
                   help="the address students open, when a TLS proxy serves it (https://grades.example.edu)")
    p.add_argument("--public", action="store_true",
                   help="listen on a host that is not loopback (a TLS proxy must be in front: see the docs)")
    p.add_argument("--deadline", type=float, metavar="SECONDS",
                   help="seconds a grading may take before its worker is stopped (default: the assignment's "
                        "time budget, doubled)")
    p.add_argument("--seed-per-student", action="store_true",
                   help="draw each student's hidden inputs from a seed of their own, at their first hand-in (chosen "
                        "once, at OUT's first grading: docs/grading-a-class.md)")
    p.add_argument("--lti", type=Path, metavar="FILE", help="be an LTI 1.3 tool of the LMS platforms this TOML "
                   "file registers: students launch from the LMS, grades go back to its gradebook (docs/lti.md)")
    p.add_argument("--no-sandbox", action="store_true", help="grade without the sandbox")
    p.add_argument("--require-sandbox", action="store_true",
                   help="refuse to serve unless every layer of the sandbox holds on this host")
    return p


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _checked(args: argparse.Namespace) -> None:
    from grader.serve.security import origin_of

    if not _loopback(args.host) and not args.public:
        raise UsageError(f"--host {terminal(args.host, 60)} is not a loopback address: tokens and notebooks would "
                         "cross the network in clear; put a TLS proxy in front (docs/hand-in-service.md) and pass "
                         "--public")
    if args.public and not args.origin:
        raise UsageError("--public serves students through a TLS proxy on another machine, whose scheme the "
                         "service cannot see: name the address students open with --origin (such as "
                         "https://grades.example.edu), or the hand-in page's requests are refused")
    if not 0 <= args.port <= 65535:
        raise UsageError("--port must be between 0 and 65535")
    if args.jobs < 1:
        raise UsageError("-j must be at least 1")
    if args.scheduler and args.jobs != 1:
        raise UsageError("-j does not go with --scheduler: the Dask workers' threads are the hand-ins "
                         "graded at once")
    if not args.rate > 0 or args.burst < 1:
        raise UsageError("--rate must be a positive number of hand-ins a minute, and --burst at least 1")
    if args.deadline is not None and not args.deadline > 0:
        raise UsageError("--deadline must be a positive number of seconds")
    for url in args.origin:
        if origin_of(url) is None:
            raise UsageError(f"--origin {terminal(url, 80)} is not an address such as https://grades.example.edu")


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket, or one sentence saying why not."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # IPPROTO_TCP named, as asyncio needs to set TCP_NODELAY on each connection: without it every
    # answer on a kept-alive connection (a client polling its verdict) waited ~40 ms for Nagle
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} of {terminal(host, 60)} is in use: pass another --port") from None
        raise UsageError(f"cannot listen on {terminal(host, 60)}:{port} ({exc.strerror or exc})") from None
    return sock


def serve_command(parser: type[argparse.ArgumentParser], argv: list[str], *,
                  sandbox: Callable[[argparse.Namespace], bool]) -> int:
    """Parse, check, and serve until stopped; `sandbox(args)` is the command line's check of the
    host's sandbox (a batch's: the core layers, or --no-sandbox)."""
    args = _parser(parser).parse_args(argv)
    _checked(args)
    sandboxed = sandbox(args)
    from grader.outputs.staging import SERVICE_HOLDER, locked, recover

    args.outdir.mkdir(parents=True, exist_ok=True)
    with locked(args.outdir, holder=f"{SERVICE_HOLDER} (pid {os.getpid()})"):
        recover(args.outdir)
        return _serve(args, sandboxed)


def _serve(args: argparse.Namespace, sandboxed: bool) -> int:
    import uvicorn

    from grader.serve.setup import prepare

    prepared = prepare(args.outdir, args.assignment, args.roster, sandboxed=sandboxed, workers=args.jobs,
                       per_minute=args.rate, burst=args.burst, deadline_s=args.deadline, scheduler=args.scheduler,
                       lti=args.lti, origin=args.origin[0] if args.origin else None,
                       seed_per_student=args.seed_per_student)
    from grader.serve.app import build_app

    app = build_app(prepared.serving, origins=args.origin, any_host=args.public)
    sock = _bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    workers = f"the Dask workers of {terminal(args.scheduler, 80)}" if args.scheduler else f"{args.jobs} worker(s)"
    print(f"grade serve: http://{shown_host}:{port}/ hands in {prepared.serving.assignment} for "
          f"{len(prepared.serving.tokens)} student(s) into {terminal(args.outdir, PATH_LIMIT)} "
          f"({workers}; Ctrl-C stops){prepared.notes}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, proxy_headers=True,
                            forwarded_allow_ips="127.0.0.1", timeout_graceful_shutdown=5, server_header=False)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        left = prepared.serving.jobs.counts().get("queued", 0)
        kept = f"; {left} hand-in(s) still queued are graded when it starts again" if left else ""
        print(f"grade serve: stopped{kept}", file=sys.stderr, flush=True)
    return 0
