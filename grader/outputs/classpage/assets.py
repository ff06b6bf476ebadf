"""The class page's inline style and script, and the Content-Security-Policy that admits them.

Why inline: the page is one file that opens anywhere (a laptop offline, an LMS, an archive) and
loads nothing. Why a script at all: sorting the students table by score, name or status. It is
optional: without it the table is sorted by name, as written. It reads the sort from the URL
(`#sort=score`, `#sort=-score` for highest first, or `?sort=...`), so a sorted view is a link and
a header click is a plain link to `#sort=...` (nothing happens to the page with scripts off).

The policy (`csp`) allows this one script by its hash and nothing else: no other script, no
`javascript:` URL, no fetch, no form, no base. Student text is escaped anyway (`markup.esc`); the
policy means a mistake there would still run nothing.
"""

from __future__ import annotations

import base64
import hashlib

CSS = """
:root { --ink:#1f2328; --muted:#656d76; --line:#d0d7de; --soft:#f6f8fa; --blue:#3b6fd4;
        --red:#cf222e; --amber:#bf8700; --green:#1a7f37; }
* { box-sizing: border-box; }
body { margin: 0; padding: 28px 36px 48px; color: var(--ink); background: #fff;
       font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
main { max-width: 1240px; margin: 0 auto; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.sub { color: var(--muted); margin: 0 0 12px; }
nav.toc { font-size: 13px; margin: 14px 0 0; display: flex; flex-wrap: wrap; gap: 4px 14px; }
.note { color: var(--muted); font-size: 12.5px; margin: 4px 0 8px; }
.warn { color: var(--red); }
.cards { display: flex; gap: 12px; flex-wrap: wrap; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 16px; min-width: 120px;
        background: var(--soft); }
.card.alert .v { color: var(--red); }
.card .v { font-size: 22px; font-weight: 600; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.scroll { overflow-x: auto; max-width: 100%; -webkit-overflow-scrolling: touch; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; background: var(--soft); white-space: nowrap;
     vertical-align: bottom; }
td.n, th.n { text-align: right; white-space: nowrap; }
tbody tr:hover { background: #fafbfc; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; color: var(--muted); }
td > code:not(.ascii) { white-space: nowrap; }
code.ascii { overflow-wrap: break-word; }
.meter { display: inline-block; width: 110px; height: 9px; background: #eaeef2; border-radius: 5px;
         overflow: hidden; vertical-align: middle; }
.meter .fill { display: block; height: 100%; }
.fill.low { background: var(--red); } .fill.mid { background: var(--amber); }
.fill.high { background: var(--green); }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px; white-space: nowrap; }
.badge.graded { background: #dafbe1; color: var(--green); }
.badge.error, .badge.missing, .badge.died { background: #ffebe9; color: var(--red); }
.badge.problems { background: #fff8c5; color: #7d4e00; }
.badge.nonascii { background: #fff8c5; color: #7d4e00; border: 1px solid #d4a72c; cursor: help; }
.tag { white-space: nowrap; font-size: 11px; color: var(--muted); border: 1px solid var(--line);
       border-radius: 4px; padding: 0 4px; margin-left: 4px; }
.reason, .why { color: var(--muted); font-size: 12px; }
.why { display: block; min-width: 13em; max-width: 30em; overflow-wrap: anywhere; }
.who { overflow-wrap: break-word; unicode-bidi: isolate; }  /* a right-to-left name stays in its place;
   it wraps at its <wbr>s (after _ @ . - +), never mid-number; only a part wider than its box breaks */
td.student { min-width: 9em; max-width: 18em; }
td.notes { white-space: nowrap; }
table.students td.student, table.students th:first-child { position: sticky; left: 0; z-index: 1; }
table.students td.student { background: #fff; }
.json { font-size: 11px; margin-left: 6px; color: var(--muted); }
td.msg { min-width: 14em; overflow-wrap: anywhere; }
th .max { font-weight: 400; }
th a { color: inherit; }
th[aria-sort] a::after { content: " \\2195"; opacity: .45; }
th[aria-sort=ascending] a::after { content: " \\25B2"; opacity: 1; }
th[aria-sort=descending] a::after { content: " \\25BC"; opacity: 1; }
td.weak { background: #fff1f0; }
s { color: var(--muted); }
ul.plain { margin: 4px 0; padding-left: 18px; } ul.plain li { margin: 3px 0; overflow-wrap: break-word; }
a { color: var(--blue); text-decoration: none; } a:hover { text-decoration: underline; }
h3.wrong { font-size: 14px; margin: 22px 0 2px; }
h3.wrong code { color: var(--ink); }
p.share { margin: 2px 0 6px; }
table.wrong { margin-bottom: 8px; }
table.wrong td.n { width: 5em; }
details summary { cursor: pointer; color: var(--muted); font-size: 12px; }
.who-all { margin: 4px 0; overflow-wrap: break-word; font-size: 12px; }
svg.histogram { display: block; width: 100%; max-width: 560px; height: auto; }  /* drawn 440 wide */
svg .bar { fill: var(--blue); } svg .bar-error { fill: #b7bdc5; }
svg .axis { stroke: var(--muted); stroke-width: 1; }
svg text { font-size: 13px; text-anchor: middle; fill: var(--ink); }
svg text.tick { fill: var(--muted); font-size: 11.5px; }
svg text.count.zero { fill: #aab1b9; }
.legend { font-size: 12px; color: var(--muted); }
.legend i { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; vertical-align: -1px; }
.legend .graded { background: var(--blue); } .legend .error { background: #b7bdc5; }
.empty { padding: 40px; text-align: center; color: var(--muted); border: 1px dashed var(--line);
         border-radius: 8px; }
@media (max-width: 640px) {
  body { padding: 14px 12px 32px; font-size: 13.5px; }
  h1 { font-size: 19px; } h2 { margin-top: 24px; }
  .cards { gap: 8px; } .card { min-width: 0; flex: 1 1 28%; padding: 6px 10px; }
  .card .v { font-size: 18px; } .card .k { font-size: 10.5px; }
  th, td { padding: 4px 6px; }
  .meter { width: 56px; }
  .why { max-width: 22em; }
}
"""

SCRIPT = """
(function () {
  "use strict";
  var table = document.getElementById("students-table");
  if (!table) { return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var said = document.getElementById("sorted-by");
  var words = {name: ["by name", "by name, Z to A"],
               score: ["by final score, lowest first", "by final score, highest first"],
               status: ["by status, not graded first", "by status, graded first"]};
  var pattern = /(?:^|[#?&])sort=(-?)(name|score|status)(?:&|$)/;
  function wanted() {
    var m = pattern.exec(location.hash) || pattern.exec(location.search);
    return m ? {by: m[2], down: m[1] === "-"} : {by: "name", down: false};
  }
  function key(row, by) {
    return Number(row.getAttribute(by === "name" ? "data-order" : "data-" + by));
  }
  function apply() {
    var s = wanted();
    rows.sort(function (a, b) {
      var d = key(a, s.by) - key(b, s.by);
      return (s.down ? -d : d) || key(a, "name") - key(b, "name");
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(table.querySelectorAll("a[data-sort]"), function (a) {
      var col = a.getAttribute("data-sort"), on = col === s.by;
      a.setAttribute("href", "#sort=" + (on && !s.down ? "-" : "") + col);
      a.parentNode.setAttribute("aria-sort", on ? (s.down ? "descending" : "ascending") : "none");
    });
    table.setAttribute("data-sorted", (s.down ? "-" : "") + s.by);
    if (said) { said.textContent = "Sorted " + words[s.by][s.down ? 1 : 0] + "."; }
  }
  window.addEventListener("hashchange", apply);
  apply();
}());
"""


def csp(script: str = SCRIPT) -> str:
    """The page's policy: inline style, this script by its sha256, inline SVG, nothing else."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; "
            "img-src data:; base-uri 'none'; form-action 'none'")
