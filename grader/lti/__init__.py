"""The hand-in service as an LTI 1.3 tool (`grade serve ... --lti FILE`): students launch the
assignment from their LMS already known, and their grades go back to its gradebook.

    registration.py   the platforms the tool is registered with (a TOML file), checked at start
    keys.py           the tool's own key pair (OUT/lti/tool-key.pem) and its JWKS
    platform_keys.py  the platforms' keys, read from their JWKS URLs, kept, read again when rotated
    store.py          logins begun, launch sessions, links (where a grade goes), the outbox's rows
    launch.py         the OIDC login initiation and the launch's id_token, checked
    identity.py       which roster student a launch is, or why none
    routes.py         /lti/login, /lti/launch, /lti/jwks, /lti/config; deep linking
    pages.py          the LTI pages: a refusal, the instructor's view, the deep-linking answer
    ags.py            Assignment and Grade Services: a token, a line item, a score
    outbox.py         grades owed to the LMS, sent by one thread, retried, kept across restarts
    tool.py           all of it in one object for the service

docs/lti.md is the instructor's guide; docs/lti-platforms.md what each LMS needs, from its docs.
"""
