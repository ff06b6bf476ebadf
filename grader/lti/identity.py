"""Who a launch is: the roster's student its claims name, its role, and nothing taken on trust.

A launch carries several ids of its user, and the roster knows students by the instructor's ids
(SIS Login ID, SIS User ID, Canvas's user id, or a plain list: grader/serve/roster.py). The
registration's `match` lists the claims tried (default: the LIS `person_sourcedid`, the SIS id
most platforms send, and the e-mail; `sub`, the platform's own user id, only when listed, for a
roster of that platform's ids; a custom parameter such as `student_id`, mapped by the instructor
to the id the roster uses, only in a registration pinned to its courses). Every claim is tried, not only the first that matches: when two of them
name two different students of the roster, the launch is refused as ambiguous, never decided by
the order (a display name or an e-mail a student chose must not claim another's grade). No
match: refused, with the sentence saying which ids were looked for, so the instructor can fix
the roster or the custom parameter.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

LIS = "https://purl.imsglobal.org/spec/lti/claim/lis"
CUSTOM = "https://purl.imsglobal.org/spec/lti/claim/custom"
ROLES = "https://purl.imsglobal.org/spec/lti/claim/roles"
_CLAIMS = {
    "sub": lambda c: c.get("sub"),
    "email": lambda c: c.get("email"),
    "lis.person_sourcedid": lambda c: (c.get(LIS) or {}).get("person_sourcedid") if isinstance(c.get(LIS), dict)
    else None,
}
_TEACHING = ("membership#Instructor", "membership#Administrator", "Instructor#TeachingAssistant")
"""Roles that see the staff page; not Mentor (Canvas's observers: parents) nor ContentDeveloper."""
_LEARNING = ("membership#Learner", "institution/person#Student", "membership/Learner#Learner")


def claim_names() -> frozenset[str]:
    """The claims a registration's `match` may name (and any `custom.NAME`)."""
    return frozenset(_CLAIMS)


class Identity(BaseModel):
    """A launch's user as the service sees them."""

    student: str | None  # on the roster; None: not a student of it (see `refusal`)
    teaching: bool  # an instructor, TA, administrator of the context
    name: str  # for the page only: "Handing in as ..."
    refusal: str | None = None


def _value(claims: dict[str, Any], name: str) -> str | None:
    if name.startswith("custom."):
        custom = claims.get(CUSTOM)
        found = custom.get(name.removeprefix("custom.")) if isinstance(custom, dict) else None
    else:
        found = _CLAIMS[name](claims)
    if isinstance(found, (int, float)) and not isinstance(found, bool):
        found = str(found)
    # an unsubstituted custom variable ("$Canvas.user.sisid") is the platform saying it has none
    return found.strip() if isinstance(found, str) and found.strip() and not found.startswith("$") else None


def roles_of(claims: dict[str, Any]) -> list[str]:
    roles = claims.get(ROLES)
    return [r for r in roles if isinstance(r, str)] if isinstance(roles, list) else []


def identify(claims: dict[str, Any], match: tuple[str, ...], roster: set[str]) -> Identity:
    """The launch's student on `roster`, tried by every claim of `match`."""
    roles = roles_of(claims)
    teaching = any(r.endswith(t) for r in roles for t in _TEACHING)
    learning = any(r.endswith(t) for r in roles for t in _LEARNING)
    name = claims.get("name") if isinstance(claims.get("name"), str) else ""
    name = (name or _value(claims, "email") or "").strip()[:120]
    found = {claim: value for claim in match if (value := _value(claims, claim)) is not None}
    students = {value for value in found.values() if value in roster}
    if teaching and not learning:
        return Identity(student=None, teaching=True, name=name)
    if len(students) > 1:
        named = " and ".join(f"{claim} names {value}" for claim, value in found.items() if value in students)
        return Identity(student=None, teaching=teaching, name=name, refusal=(
            f"your LMS account matches more than one student of this course's roster ({named}): your instructor "
            "must correct the roster or the tool's custom parameter before you can hand in here"))
    if not students:
        looked = ", ".join(match)
        return Identity(student=None, teaching=teaching, name=name, refusal=(
            f"your LMS account is not on this course's roster (looked for: {looked}): ask your instructor to add "
            "you, or to map the tool's custom parameter student_id to the id the roster uses"))
    return Identity(student=students.pop(), teaching=teaching, name=name)
