"""The hand-in page (`GET /` of `grade serve`): one self-contained HTML page a student opens on a
laptop or a phone to hand in a notebook and read the verdict, built to the service's HTTP API.

Nothing is loaded from elsewhere: the style and the script are inline and carry the response's CSP
nonce (`content_security_policy` is the header the page is made for). The token arrives once, pasted,
or in the link's fragment (`#token=...`, which never reaches a server's log), or in the page itself
when an LMS launch opened it (grader/lti/routes.py), and lives in the tab's
sessionStorage; it travels only in the Authorization header of the page's own requests (no cookie,
so no cross-site request can carry it). A link's token is only offered: the page asks the student
whether the roster id it signs in is theirs before taking it, since anyone can send a link with
their own token in it (a classmate's work handed in into their account); so is the session of a
launch no login cookie vouched for. Every sentence the service or a student wrote is shown with
`textContent`; the feedback page is shown in an iframe with `sandbox=""` (nothing in it runs), its
style let through by the page's nonce, since a srcdoc frame keeps the page's policy.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence

_NONCE = re.compile(r"[A-Za-z0-9+/_=-]{16,128}")

_STYLE = """
:root{color-scheme:light}
body{font:16px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:52em;padding:0 1em;color:#222}
h1{font-size:1.4em;margin:.2em 0 .4em}h2{font-size:1.1em}p,li,h1{overflow-wrap:anywhere}
form{display:flex;flex-wrap:wrap;gap:.5em;align-items:center;margin:.8em 0}
label{flex:1 0 100%;font-weight:600}
input[type=password],input[type=file]{flex:1 1 14em;min-width:0;font:inherit;padding:.45em;
 border:1px solid #aaa;border-radius:6px;background:#fff}
button{font:inherit;min-height:2.6em;padding:.3em 1.1em;border-radius:6px;border:1px solid #1f6feb;
 background:#1f6feb;color:#fff;cursor:pointer}
button:disabled{opacity:.55;cursor:default}
button.plain{background:none;color:#1f6feb;border:none;padding:0 .2em;min-height:0;text-decoration:underline}
.who{color:#444}.error{color:#b3261e;font-weight:600}
#progress{border:1px solid #ddd;border-radius:8px;padding:.6em 1em;margin:1em 0}
#state{font-weight:600;margin:.2em 0}#message{margin:.3em 0}
.score{font-size:2em;font-weight:700;margin:.1em 0}.full{color:#1a7f37}.part{color:#9a6700}.none{color:#cf222e}
iframe{display:block;width:100%;height:75vh;border:1px solid #ddd;border-radius:8px;background:#fff}
ol{padding-left:1.4em}li{margin:.4em 0}.state{font-weight:600}
[hidden]{display:none !important}
@media (max-width:40em){body{margin:.8em auto;padding:0 .7em}h1{font-size:1.25em}.score{font-size:1.7em}}
"""

_SCRIPT = r"""
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const NONCE = document.currentScript.nonce;
  const KEY = "grade-hand-in-token";
  const LONGEST = 1000;  // characters of any sentence shown
  const OFFER_WAIT_MS = 700;  // how long "Yes, that is me" waits before it answers
  const DONE = new Set(["graded", "not_graded", "superseded"]);
  let memory = null;  // the token, when the browser keeps no sessionStorage
  let following = null;  // the id of the hand-in whose progress is shown

  class Failure extends Error {
    constructor(sentence, status, retryAfter) {
      super(sentence);
      this.status = status;
      this.retryAfter = Math.min(Math.max(Number(retryAfter) || 1, 0), 60);
    }
  }

  function stored() {
    try { return sessionStorage.getItem(KEY) || memory; } catch (e) { return memory; }
  }
  function store(token) {
    memory = token;
    try {
      if (token === null) sessionStorage.removeItem(KEY); else sessionStorage.setItem(KEY, token);
    } catch (e) { /* private mode: the token lives as long as the page */ }
  }
  const fine = (token) => /^[\x21-\x7e]{1,512}$/.test(token);

  // a link with #token=...: out of the address bar and the history at once, and only offered (it
  // is taken once the student says the id it signs in is theirs: anyone can send a link with a token)
  let offered = null;
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.has("token")) {
    offered = (fragment.get("token") || "").trim() || null;
    history.replaceState(null, "", location.pathname + location.search);
  }
  // an LMS launch: its session is in the page, taken at once when the browser's login cookie vouched
  // for the launch, else only offered, as a link's; the address bar shows the page's own address
  // (the launch answered a POST, which a reload would repeat)
  const launched = $("launch");
  if (launched) {
    try {
      const given = JSON.parse(launched.textContent);
      if (typeof given.token === "string" && fine(given.token)) {
        if (given.offer) offered = given.token; else store(given.token);
      }
    } catch (e) { /* no session: the token form is shown */ }
    history.replaceState(null, "", new URL("..", location.href).pathname);
  }

  const api = (path) => new URL("api/" + path, document.baseURI).href;
  const said = (text) => String(text).slice(0, LONGEST);
  const points = (x) => String(Math.round(Number(x) * 100) / 100);

  function say(id, text) {
    const where = $(id);
    where.textContent = text ? said(text) : "";
    where.hidden = !text;
  }

  async function sentence(reply) {
    try {
      const body = await reply.json();
      if (body && typeof body.error === "string" && body.error.trim()) return body.error;
    } catch (e) { /* not JSON: say the status */ }
    return "The hand-in service answered " + reply.status + " " + reply.statusText +
      "; try again in a minute.";
  }

  async function ask(token, path, options) {  // one request made with `token`: its reply, or a Failure
    let reply;
    try {
      reply = await fetch(api(path), Object.assign({
        headers: {"Authorization": "Bearer " + token, "Accept": "application/json"},
        cache: "no-store", credentials: "omit", redirect: "error", referrerPolicy: "no-referrer",
      }, options || {}));
    } catch (e) {
      throw new Failure("Could not reach the hand-in service; check your connection and try again.", 0);
    }
    if (!reply.ok) throw new Failure(await sentence(reply), reply.status, reply.headers.get("Retry-After"));
    return reply;
  }

  async function call(path, options) {  // a request with the tab's token; a refused token signs out
    const token = stored();
    if (!token) throw new Failure("Paste your token first.", 401);
    try {
      return await ask(token, path, options);
    } catch (failure) {
      if (failure.status === 401) signOut();
      throw failure;
    }
  }

  function showFailure(error) {
    say("error", error instanceof Failure ? error.message : "Something went wrong in this page; reload it.");
  }

  function signOut() {  // nothing of the last token's student stays on the page
    store(null);
    following = null;
    for (const id of ["signed", "hand-in", "history", "progress", "feedback"]) $(id).hidden = true;
    $("feedback").srcdoc = "";
    $("hand-ins").replaceChildren();
    $("token-form").hidden = false;
    $("token").value = "";
  }

  async function signIn() {
    const reply = await call("hand-ins");
    const mine = await reply.json();
    say("student", mine.student);
    say("assignment", mine.assignment);
    $("token-form").hidden = true;
    $("signed").hidden = false;
    $("hand-in").hidden = false;
    list(mine.hand_ins || []);
    return mine;
  }

  const STATES = {queued: "Queued", running: "Being graded…", graded: "Graded",
                  not_graded: "Not graded", superseded: "Replaced by a newer hand-in"};

  function stateLine(status) {
    if (status.state === "queued") {
      const ahead = Number(status.position);
      if (Number.isInteger(ahead) && ahead > 0)
        return "Queued: " + ahead + (ahead === 1 ? " hand-in" : " hand-ins") + " ahead of yours";
      return "Queued: yours is next";
    }
    return STATES[status.state] || "Waiting";
  }

  function show(status) {
    $("progress").hidden = false;
    say("state", stateLine(status));
    say("message", status.message || "");
    const score = $("score");
    if (typeof status.score === "number" && typeof status.max_score === "number") {
      score.textContent = points(status.score) + " / " + points(status.max_score);
      const share = status.score >= status.max_score ? "full" : status.score > 0 ? "part" : "none";
      score.className = "score " + share;
      score.hidden = false;
    } else {
      score.hidden = true;
    }
  }

  async function feedback(id) {
    const reply = await call("hand-ins/" + encodeURIComponent(id) + "/feedback", {
      headers: {"Authorization": "Bearer " + stored(), "Accept": "text/html"}});
    const page = await reply.text();
    if (following !== id) return;  // another hand-in is shown meanwhile
    // a srcdoc frame keeps this page's policy: its style needs this page's nonce to be applied
    const frame = $("feedback");
    frame.srcdoc = page.replace("<style>", "<style nonce=\"" + NONCE + "\">");
    frame.hidden = false;
  }

  const pause = (ms) => new Promise((done) => setTimeout(done, ms));

  async function follow(id) {
    following = id;
    $("feedback").hidden = true;
    let delay = 200;
    const end = Date.now() + 20 * 60 * 1000;
    while (following === id) {
      let status;
      try {
        status = await (await call("hand-ins/" + encodeURIComponent(id))).json();
      } catch (error) {
        if (!(error instanceof Failure) || Date.now() > end) throw error;
        if (error.status === 429) {  // asked too often: wait as long as the service says
          await pause(Math.max(delay, error.retryAfter * 1000));
          continue;
        }
        if (error.status !== 0) throw error;
        say("state", "Connection lost; trying again…");
        await pause(delay);
        delay = Math.min(delay * 2, 5000);
        continue;
      }
      if (following !== id) return;
      show(status);
      if (DONE.has(status.state)) {
        if (status.state === "graded") await feedback(id);
        await refresh();
        return;
      }
      if (Date.now() > end) {
        say("state", "Still being graded: reload this page later to see the verdict.");
        return;
      }
      await pause(delay);
      delay = Math.min(delay * 1.5, 3000);
    }
  }

  function list(handIns) {
    const items = $("hand-ins");
    items.replaceChildren();
    for (const status of handIns.slice().reverse()) {  // the newest first
      const item = document.createElement("li");
      const state = document.createElement("span");
      state.className = "state";
      state.textContent = stateLine(status);
      item.append(state);
      if (typeof status.score === "number" && typeof status.max_score === "number")
        item.append(" " + points(status.score) + " / " + points(status.max_score));
      if (status.message) item.append(": " + said(status.message));
      if (status.state === "graded" || !DONE.has(status.state)) {
        const open = document.createElement("button");
        open.type = "button";
        open.className = "plain";
        open.textContent = status.state === "graded" ? "feedback" : "follow";
        open.addEventListener("click", () => {
          say("error", "");
          follow(String(status.id)).catch(showFailure);
        });
        item.append(" ", open);
      }
      items.append(item);
    }
    $("history").hidden = handIns.length === 0;
  }

  async function refresh() {
    try { list(((await (await call("hand-ins")).json()).hand_ins) || []); } catch (e) { /* the verdict stays */ }
  }

  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!fine(token)) {
      say("error", "That is not a token: paste the token your course gave you, without spaces.");
      return;
    }
    say("error", "");
    store(token);
    signIn().catch(showFailure);
  });

  $("forget").addEventListener("click", () => { say("error", ""); signOut(); });

  $("hand-in").addEventListener("submit", async (event) => {
    event.preventDefault();
    say("error", "");
    const file = $("file").files[0];
    if (!file) { say("error", "Choose your notebook (.ipynb) or module (.py) first."); return; }
    if (!/\.(ipynb|py)$/i.test(file.name)) {
      say("error", "Choose a notebook (.ipynb) or a module (.py): " + file.name + " is neither.");
      return;
    }
    const body = new FormData();
    body.append("file", file, file.name);
    const send = $("send");
    send.disabled = true;
    following = null;
    $("feedback").hidden = true;
    $("progress").hidden = false;
    say("state", "Handing in " + file.name + "…");
    say("message", "");
    $("score").hidden = true;
    try {
      const job = await (await call("hand-ins", {method: "POST", body: body})).json();
      show(job);
      send.disabled = false;
      await follow(String(job.id));
    } catch (error) {
      say("state", "");
      showFailure(error);
    } finally {
      send.disabled = false;
    }
  });

  function start() {
    if (stored()) {
      signIn().then((mine) => {
        const open = (mine.hand_ins || []).filter((h) => !DONE.has(h.state));
        if (open.length) return follow(String(open[open.length - 1].id));
      }).catch(showFailure);
    } else {
      signOut();
    }
  }

  let offeredAt = 0;  // when the offer was shown: a click that lands at once was aimed at something else
  $("offer-yes").addEventListener("click", (event) => {
    if (event.timeStamp - offeredAt < OFFER_WAIT_MS || document.visibilityState !== "visible") return;
    $("offer").hidden = true;
    store(offered);
    offered = null;
    start();
  });
  $("offer-no").addEventListener("click", () => {
    $("offer").hidden = true;
    offered = null;
    say("error", "The link was not used. Open the assignment from your course, or paste your own token.");
    start();
  });

  if (offered && !fine(offered)) {
    offered = null;
    say("error", "This link holds no usable token: open the assignment from your course, or paste your token.");
  }
  if (offered) {  // whose is it? asked with the offered token alone; the tab's own stays as it was
    ask(offered, "hand-ins").then(async (reply) => {
      const theirs = await reply.json();
      say("offer-student", theirs.student);
      say("offer-assignment", theirs.assignment);
      for (const id of ["token-form", "signed", "hand-in", "history", "progress", "feedback"]) $(id).hidden = true;
      $("offer").hidden = false;
      offeredAt = performance.now();  // Yes answers only after a moment (a double click aimed elsewhere)
      $("offer-yes").disabled = true;
      setTimeout(() => { $("offer-yes").disabled = false; }, OFFER_WAIT_MS);
    }).catch((error) => { offered = null; showFailure(error); if (!stored()) signOut(); else start(); });
  } else {
    start();
  }
})();
"""


def content_security_policy(nonce: str, frame_origins: Sequence[str] = ()) -> str:
    """The Content-Security-Policy the page is made for: its own origin only, its inline style and
    script by `nonce` (fresh per response), no base or form target elsewhere, and framed only by
    `frame_origins` (the LMSs an LTI launch opens it in; by nothing without one)."""
    _check(nonce)
    ancestors = " ".join(frame_origins) or "'none'"
    return (f"default-src 'self'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; img-src 'self' data:; "
            f"base-uri 'none'; form-action 'self'; frame-ancestors {ancestors}")


def _check(nonce: str) -> None:
    if not _NONCE.fullmatch(nonce):
        raise ValueError("a CSP nonce is 16 to 128 base64 characters (secrets.token_urlsafe(16))")


def hand_in_page(*, nonce: str, title: str, session: str | None = None, offer: bool = False) -> str:
    """The page, its inline style and script carrying `nonce` (the one in this response's CSP
    header); `title` (the assignment's) is escaped. `session`: the token of an LMS launch (in a JSON
    block no markup can end), taken at once, or with `offer` only once the student says the id it
    signs in is theirs (a launch nothing vouched for)."""
    _check(nonce)
    shown = html.escape(title)
    launch = ""
    if session is not None:
        data = json.dumps({"token": session, "offer": offer})
        data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        launch = f"<script type='application/json' id='launch' nonce='{nonce}'>{data}</script>"
    return (
        "<!doctype html><html lang='en'><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<meta name='referrer' content='no-referrer'><link rel='icon' href='data:,'>"
        f"<title>Hand in · {shown}</title><style nonce='{nonce}'>{_STYLE}</style>"
        f"<h1>Hand in · {shown}</h1>"
        "<p>Hand in your notebook (.ipynb) or module (.py): it is graded at once, and your score and "
        "feedback show here. The last hand-in counts.</p>"
        "<noscript><p class='error'>This page needs JavaScript. You can also hand in from a terminal: "
        "grade NOTEBOOK.ipynb --hand-in</p></noscript>"
        "<form id='token-form' hidden><label for='token'>Your token (from your course)</label>"
        "<input id='token' type='password' autocomplete='off' spellcheck='false' maxlength='512'>"
        "<button>Use this token</button></form>"
        "<section id='offer' hidden><p>This link signs you in to hand in <span id='offer-assignment'></span> as "
        "<b id='offer-student'></b>. Is that your student id?</p><button id='offer-yes' type='button'>Yes, that is "
        "me</button> <button id='offer-no' type='button' class='plain'>No, it is not</button>"
        "<p class='who'>If it is not yours, someone sent you a link to hand in into their account: say no.</p>"
        "</section>"
        "<p id='signed' class='who' hidden>Handing in <span id='assignment'></span> as "
        "<b id='student'></b> · <button id='forget' type='button' class='plain'>use another token</button></p>"
        "<form id='hand-in' hidden><label for='file'>Your notebook or module</label>"
        "<input id='file' name='file' type='file' accept='.ipynb,.py'>"
        "<button id='send'>Hand in</button></form>"
        "<p id='error' class='error' role='alert' hidden></p>"
        "<section id='progress' aria-live='polite' hidden><p id='state'></p>"
        "<p id='score' class='score' hidden></p><p id='message'></p></section>"
        "<iframe id='feedback' sandbox='' title='feedback on your hand-in' hidden></iframe>"
        "<section id='history' hidden><h2>Your hand-ins</h2><ol id='hand-ins'></ol></section>"
        f"{launch}<script nonce='{nonce}'>{_SCRIPT}</script></html>\n"
    )
