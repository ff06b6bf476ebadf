"""The few pages the LTI side answers with besides the hand-in page: a refusal, the instructor's
launch, a deep-linking answer.

Each is a small HTML page whose every value is escaped, under a Content-Security-Policy of its own
(no script but the deep-linking form's, by nonce; framed only by the registered LMSs' pages).
"""

from __future__ import annotations

import html
import secrets

_STYLE = ("body{font:16px/1.45 system-ui,sans-serif;max-width:40rem;margin:1.5rem auto;padding:0 1rem}"
          ".error{color:#a00}td,th{text-align:left;padding:.2rem .6rem .2rem 0}")


def _policy(frame_origins: list[str], *, nonce: str | None = None, form_action: str | None = None) -> str:
    ancestors = " ".join(frame_origins) if frame_origins else "'none'"
    script = f"'nonce-{nonce}'" if nonce else "'none'"
    action = form_action or "'none'"
    return (f"default-src 'none'; style-src 'nonce-{{style}}'; script-src {script}; base-uri 'none'; "
            f"form-action {action}; frame-ancestors {ancestors}")


def _page(title: str, body: str, policy: str) -> tuple[str, str]:
    style_nonce = secrets.token_urlsafe(16)
    page = (f"<!doctype html><html lang='en'><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(title)}</title><style nonce='{style_nonce}'>{_STYLE}</style>{body}</html>\n")
    return page, policy.replace("{style}", style_nonce)


def refusal(sentence: str, frame_origins: list[str]) -> tuple[str, str]:
    """(page, CSP) for a launch the tool does not take."""
    return _page("Cannot open this assignment",
                 f"<h1>Cannot open this assignment</h1><p class='error' role='alert'>{html.escape(sentence)}</p>",
                 _policy(frame_origins))


def teaching(name: str, assignment: str, counts: dict[str, int], refused: list[tuple[str, int | None, str]],
             frame_origins: list[str]) -> tuple[str, str]:
    """(page, CSP) for an instructor's or TA's launch: what the service is sending to this LMS."""
    rows = "".join(f"<tr><td>{html.escape(s)}</td><td>{status or '-'}</td><td>{html.escape(said)}</td></tr>"
                   for s, status, said in refused[:50])
    refused_table = (f"<h2>Grades the LMS refused</h2><table><tr><th>student</th><th>status</th><th>the LMS said"
                     f"</th></tr>{rows}</table>" if rows else "")
    body = (f"<h1>{html.escape(assignment)}: the grading service</h1>"
            f"<p>You opened this as {html.escape(name) or 'a member of the teaching staff'}. Students who open it "
            "hand in here; each grade (after the course's late policy and your adjustments) is sent to this LMS's "
            "gradebook.</p>"
            f"<p>Grades sent: {counts.get('sent', 0)} · waiting to be sent: {counts.get('pending', 0)} · refused: "
            f"{counts.get('failed', 0)}</p>{refused_table}")
    return _page(f"{assignment}: the grading service", body, _policy(frame_origins))


def deep_linking_answer(return_url: str, jwt: str, title: str, frame_origins: list[str],
                        return_origin: str) -> tuple[str, str]:
    """(page, CSP) that posts the deep-linking answer back to the LMS (on its own, or by its button)."""
    nonce = secrets.token_urlsafe(16)
    body = (f"<h1>Add {html.escape(title)}</h1><form id='answer' method='post' action='{html.escape(return_url)}'>"
            f"<input type='hidden' name='JWT' value='{html.escape(jwt)}'>"
            "<p>Adding the assignment to your course…</p><button>Add it</button></form>"
            f"<script nonce='{nonce}'>document.getElementById('answer').submit();</script>")
    return _page(f"Add {title}", body, _policy(frame_origins, nonce=nonce, form_action=return_origin))
