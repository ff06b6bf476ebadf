"""What the verifier answered for a module and its inputs, reused within a batch worker.

A verifier's answer depends on nothing but the job: the exact bytes of the serialized module and
the exact inputs of each call (the runtime is the grader's, the backend is the CPU, and every
verifier is a fresh process with the same flags). So a job whose module bytes and inputs are
identical to one already answered gets that answer again, without a verifier: identical input,
identical program, so no student can change another's verdict through it. A class whose
students hand in the same program (the same notebook, a shared helper cell) skips most
verification; this is measured in `make bench`.

Only answers the verifier gave are kept ("ok" and "refused"): not "error", which may come from
the machine (XLA out of memory), and not "timeout" or "crashed", which the grader decided on the
clock or on a dying process. The cache holds at most `max_bytes` of answers (their size on the
wire, least recently used first out) and lives in the grader's memory, never on disk.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from grader.verifier.protocol import VerifierJob, VerifierResult

MAX_BYTES = 64 * 2**20
CACHED_STATUSES = ("ok", "refused")


def job_key(job: VerifierJob) -> bytes:
    """A digest of what the answer depends on: the module's bytes, every call's inputs and, for a
    knockout job, the outputs it is given and its tolerance (not `functions`: bookkeeping)."""
    digest = hashlib.sha256()
    digest.update(len(job.module).to_bytes(8, "little"))
    digest.update(job.module)
    digest.update(("knockouts:" + ",".join(sorted(set(job.knockouts))) + "\x00").encode())
    if job.knockouts:
        digest.update(f"tolerance:{job.tolerance[0]!r},{job.tolerance[1]!r}\x00".encode())
    for call in job.calls:
        digest.update(b"\x00call")
        for value in call:
            digest.update(value.model_dump_json().encode())
            digest.update(b"\x00")
    if job.outputs is not None:
        for call in job.outputs:
            digest.update(b"\x00outputs")
            for value in call:
                digest.update(value.model_dump_json().encode())
                digest.update(b"\x00")
    return digest.digest()


class ResultCache:
    """Answers by job key; `get` gives a copy under the asking job's id."""

    def __init__(self, max_bytes: int = MAX_BYTES):
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[bytes, tuple[VerifierResult, int]] = OrderedDict()
        self._bytes = 0

    def get(self, job: VerifierJob) -> VerifierResult | None:
        key = job_key(job)
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry[0].model_copy(update={"id": job.id, "seconds": 0.0})

    def put(self, job: VerifierJob, result: VerifierResult, size: int) -> None:
        """Keep an answer of `size` bytes on the wire (only the verifier's own statuses)."""
        if result.status not in CACHED_STATUSES or size > self.max_bytes:
            return
        key = job_key(job)
        if key in self._entries:
            return
        self._entries[key] = (result, size)
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self._bytes -= dropped

    def __len__(self) -> int:
        return len(self._entries)
