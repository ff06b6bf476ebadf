"""The LTI tool's parts that need no platform: the registration file, who a launch is, the
outbox's bookkeeping (one row per link, the latest grade, timestamps that only move forward, the
doubling waits), the tool's key, and how the platform's answers are classified."""

from __future__ import annotations

import os
import stat
from datetime import datetime
from pathlib import Path

import jwt
import pytest

from grader.errors import UsageError
from grader.lti import outbox
from grader.lti.ags import Answer, Score, _outcome, scores_url
from grader.lti.identity import CUSTOM, LIS, ROLES, identify
from grader.lti.keys import tool_key
from grader.lti.registration import DEFAULT_MATCH, read_registrations
from grader.lti.store import LtiStore
from grader.report import Isolation, Report, SubmissionRef, environment

LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"

GOOD = """
[[platform]]
lms = "canvas"
issuer = "https://canvas.instructure.com"
client_id = "10000000000042"
deployment_ids = ["12:abc"]
login_url = "https://sso.canvaslms.com/api/lti/authorize_redirect"
token_url = "https://school.instructure.com/login/oauth2/token"
jwks_url = "https://sso.canvaslms.com/api/lti/security/jwks"
origins = ["https://school.instructure.com"]
"""


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "platforms.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_registration_file_is_read_and_each_mistake_is_one_sentence(tmp_path: Path) -> None:
    found = read_registrations(_file(tmp_path, GOOD))
    platform = found.find("https://canvas.instructure.com", "10000000000042")
    assert platform is not None and platform.audience == platform.token_url
    assert platform.deploys("12:abc") and not platform.deploys("13:other")
    assert found.find("https://canvas.instructure.com", None) is platform  # one registration: no client id needed
    assert found.frame_origins() == ["https://canvas.instructure.com", "https://school.instructure.com",
                                     "https://sso.canvaslms.com"]
    assert platform.match == DEFAULT_MATCH
    mistakes = {
        GOOD.replace('token_url = "https://school', 'token_url = "http://school'): "token_url must be https",
        GOOD.replace('deployment_ids = ["12:abc"]', "deployment_ids = []"): "deployment_ids",
        GOOD + 'match = ["nickname"]\n': "names no claim",
        GOOD.replace('lms = "canvas"', 'lms = "sakai"'): "lms",
        GOOD + GOOD: "twice",
        GOOD.replace("[[platform]]", "[platform]"): "one [[platform]] table",
        GOOD.replace('origins = ["https://school.instructure.com"]',
                     'origins = ["https://evil.example; script-src *"]'): "not an address",
        "issuer = ": "not TOML",
        GOOD + 'match = ["custom.student_id"]\n': "pin the course with contexts",
        GOOD.replace('lms = "canvas"', 'lms = "blackboard"').replace('["12:abc"]', '["*"]'): "every Blackboard",
        GOOD.replace('issuer = "https://canvas.instructure.com"', 'issuer = "https://lms.example.edu; script-src *"'):
            "not an address",
    }
    for text, said in mistakes.items():
        with pytest.raises(UsageError) as refused:
            read_registrations(_file(tmp_path, text))
        assert said in str(refused.value) and "platforms.toml" in str(refused.value)
    with pytest.raises(UsageError, match="cannot read"):
        read_registrations(tmp_path / "missing.toml")


def _claims(**given: object) -> dict:
    claims: dict = {"sub": "lms-user-9", ROLES: [LEARNER], "name": "Ada"}
    claims.update(given)
    return claims


def test_a_launch_is_its_roster_student_by_any_claim_and_never_by_order_when_two_disagree() -> None:
    roster = {"s100", "s200", "ada@uni.edu"}
    assert identify(_claims(**{LIS: {"person_sourcedid": "s100"}}), DEFAULT_MATCH, roster).student == "s100"
    assert identify(_claims(email="ada@uni.edu"), DEFAULT_MATCH, roster).student == "ada@uni.edu"
    pinned = ("custom.student_id", *DEFAULT_MATCH)  # a registration with contexts may match custom parameters
    assert identify(_claims(**{CUSTOM: {"student_id": 200}}), pinned, {"200"}).student == "200"
    # the same student by two claims is one student
    same = identify(_claims(**{CUSTOM: {"student_id": "s100"}, LIS: {"person_sourcedid": "s100"}}), pinned, roster)
    assert same.student == "s100"
    # an e-mail a student chose must not claim another's row: two students named, refused
    two = identify(_claims(email="ada@uni.edu", **{LIS: {"person_sourcedid": "s200"}}), DEFAULT_MATCH, roster)
    assert two.student is None and "more than one student" in (two.refusal or "")
    # an unsubstituted custom variable is no id
    assert identify(_claims(**{CUSTOM: {"student_id": "$Canvas.user.sisSourceId"}}), pinned,
                    {"$Canvas.user.sisSourceId"}).student is None
    nobody = identify(_claims(), DEFAULT_MATCH, roster)
    assert nobody.student is None and "not on this course's roster" in (nobody.refusal or "")
    staff = identify(_claims(**{ROLES: [INSTRUCTOR]}), DEFAULT_MATCH, roster)
    assert staff.teaching and staff.student is None and staff.refusal is None
    parent = identify(_claims(**{ROLES: ["http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"]}),
                      DEFAULT_MATCH, roster)
    assert not parent.teaching and parent.refusal  # an observer is no staff


def _report(student: str, score: float, final: float | None = None) -> Report:
    return Report(assignment="ch2-jit", submission=SubmissionRef(path="x.ipynb", sha256="0" * 64, kind="notebook"),
                  student=student, status="graded", score=score, max_score=100, seed=1, duration_s=1,
                  environment=environment(), exercises=[], final_score=final,
                  isolation=Isolation(sandboxed=False, layers=[]))


def _linked(store: LtiStore, student: str, sub: str) -> int:
    return store.link(issuer="https://lms", client_id="c", deployment_id="d", context_id="course", sub=sub,
                      student=student, lineitem="https://lms/li/1", lineitems=None,
                      scopes=["https://purl.imsglobal.org/spec/lti-ags/scope/score"], resource_link_id="r")[0].id


def test_the_outbox_owes_the_policy_s_grade_once_per_link_with_timestamps_that_move_forward(tmp_path: Path) -> None:
    store = LtiStore(tmp_path / "gradebook.sqlite")
    alice = _linked(store, "alice", "u1")
    assert outbox.owe(store, {"bob": _report("bob", 50)}) == 0  # bob never launched: nothing owed
    assert outbox.owe(store, {"alice": _report("alice", 80, final=72)}) == 1
    [owed] = outbox.due(store, at=1e12)
    assert (owed.link, owed.score, owed.max_score) == (alice, 72, 100)  # the late policy's grade, not the raw one
    assert outbox.owe(store, {"alice": _report("alice", 80, final=72)}) == 0  # the same grade: nothing new
    assert outbox.owe(store, {"alice": _report("alice", 90, final=81)}) == 1
    [again] = outbox.due(store, at=1e12)
    assert again.score == 81
    first, second = (datetime.fromisoformat(t) for t in (owed.timestamp, again.timestamp))
    assert second.replace(microsecond=0) > first.replace(microsecond=0)  # a later whole second (Moodle)
    assert outbox.owe(store, {}) == 1  # taken out: a cleared grade is owed
    [cleared] = outbox.due(store, at=1e12)
    assert cleared.score is None and Score(user_id="u1", score=None, max_score=100,
                                           timestamp=cleared.timestamp).body()["gradingProgress"] == "NotReady"
    assert outbox.owe(store, {}) == 0
    store.close_all()


def test_waits_double_from_the_first_and_honour_a_longer_retry_after() -> None:
    assert [outbox.wait_after(n, None, 2.0) for n in range(4)] == [2.0, 4.0, 8.0, 16.0]
    assert outbox.wait_after(0, 30.0, 2.0) == 30.0
    assert outbox.wait_after(60, None, 2.0) == outbox.MAX_WAIT_S


def test_scores_go_to_the_line_item_s_path_before_its_query() -> None:
    assert scores_url("https://moodle.example/mod/lti/services.php/2/lineitems/5/lineitem?type_id=1") == \
        "https://moodle.example/mod/lti/services.php/2/lineitems/5/lineitem/scores?type_id=1"
    assert scores_url("https://canvas.example/api/lti/courses/1/line_items/7/") == \
        "https://canvas.example/api/lti/courses/1/line_items/7/scores"


def _answer(status: int, text: str = "", **headers: str) -> Answer:
    return Answer(status=status, body=text.encode(), headers={k.lower(): v for k, v in headers.items()})


def test_the_platform_s_answers_are_done_again_later_or_refused_for_good() -> None:
    assert _outcome(_answer(200)).kind == "done"
    assert _outcome(_answer(429, **{"Retry-After": "7"})).model_dump(include={"kind", "wait_s"}) == \
        {"kind": "again", "wait_s": 7.0}
    assert _outcome(_answer(503)).kind == "again"
    assert _outcome(_answer(403, "403 Forbidden (Rate Limit Exceeded)")).kind == "again"
    assert _outcome(_answer(403, "", **{"X-Rate-Limit-Remaining": "0.0"})).kind == "again"
    refused = _outcome(_answer(422, '{"errors":"User is not a student \\u001b[31m"}'))
    assert refused.kind == "refused" and "\x1b" not in refused.said
    assert _outcome(_answer(403, "not allowed")).kind == "refused"


def test_the_tool_key_is_made_once_private_and_signs_what_its_jwks_verifies(tmp_path: Path) -> None:
    key = tool_key(tmp_path)
    path = tmp_path / "lti" / "tool-key.pem"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert tool_key(tmp_path).kid == key.kid  # read back, not made again
    signed = key.sign({"iss": "c", "aud": "https://lms/token"})
    public = jwt.PyJWKSet.from_dict(key.jwks())[key.kid]
    assert jwt.decode(signed, public, algorithms=["RS256"], audience="https://lms/token")["iss"] == "c"
    os.chmod(path, 0o644)
    with pytest.raises(UsageError, match="readable by others"):
        tool_key(tmp_path)
    path.write_bytes(b"not a key")
    os.chmod(path, 0o600)
    with pytest.raises(UsageError, match="not an RSA private key"):
        tool_key(tmp_path)
