"""The hand-in service as an LTI 1.3 tool: what `grade serve --lti FILE` adds, in one object.

`LtiTool` holds the registrations, the tool's key, the platforms' keys, the LTI tables, the AGS
client and the outbox's thread; the routes (grader/lti/routes.py) and the service's publisher
(which calls `grades_changed` after each rebuild of the outputs) use it. The address platforms and
students reach the service at is its `origin`, the first `--origin`, else the address a request
came to (a loopback service, in the tests and on a laptop).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grader.lti.ags import AgsClient
from grader.lti.keys import ToolKey, tool_key
from grader.lti.outbox import FIRST_WAIT_S, Poster, owe, refused_notice
from grader.lti.platform_keys import PlatformKeys
from grader.lti.registration import Registrations, read_registrations
from grader.lti.store import LtiStore
from grader.report import Report


@dataclass
class LtiTool:
    registrations: Registrations
    key: ToolKey
    store: LtiStore
    roster: frozenset[str]
    assignment: str  # the assignment's id: the line item's resourceId
    title: str  # its title: the line item's label, the deep link's title
    max_score: float
    origin: str | None = None  # the first --origin: the tool's address as platforms know it
    first_wait_s: float = FIRST_WAIT_S
    platform_keys: PlatformKeys = field(default_factory=PlatformKeys)

    def __post_init__(self) -> None:
        self.ags = AgsClient(self.key)
        self.poster = Poster(self.store, self.registrations, self.ags, assignment=self.assignment, label=self.title,
                             first_wait_s=self.first_wait_s)

    def start(self) -> None:
        self.poster.start()

    def stop(self) -> None:
        self.poster.stop()
        self.ags.http.close()
        self.platform_keys.close()
        self.store.close_all()

    def grades_changed(self, reports: dict[str, Report]) -> None:
        """The outputs were rebuilt with these final reports: owe each linked student their grade."""
        if owe(self.store, reports):
            self.poster.wake()

    def notices(self) -> list[str]:
        """The class page's lines from the LTI side: grades the LMS refused."""
        return refused_notice(self.store)

    def session_student(self, token: str) -> str | None:
        """The student of a launch's session token, while they are on the roster."""
        student = self.store.session_student(token)
        return student if student in self.roster else None

    def frame_origins(self) -> list[str]:
        return self.registrations.frame_origins()


def lti_tool(registrations_file: Path, out_dir: Path, gradebook: Path, *, roster: list[str], assignment: str,
             title: str, max_score: float, origin: str | None) -> LtiTool:
    """The tool for `grade serve --lti FILE`: every registration checked, the key made or read."""
    return LtiTool(registrations=read_registrations(registrations_file), key=tool_key(out_dir),
                   store=LtiStore(gradebook), roster=frozenset(roster), assignment=assignment, title=title,
                   max_score=max_score, origin=origin)
