"""`grade serve`: a hand-in service on warm workers, whose state is a batch's folder OUT.

    command.py       `grade serve`: check, lock OUT, bind, print the address, run uvicorn
    setup.py         what it sets up before it listens: assignment, roster, tokens, seed, reaper
    app.py           the HTTP routes (Starlette), the lifespan that starts and stops the rest
    security.py      headers on every response; foreign origins and hosts refused
    models.py        every HTTP body, and a job's row
    uploads.py       a hand-in's bytes: bounded, kept in OUT/hand-ins/, refused when not gradable
    limits.py        per-student rate limits and the request size limit
    tokens.py        a token per student (`grade tokens`), stored hashed
    roster.py        who may hand in: a Canvas export or a list of ids
    jobs.py          the durable job table in OUT's gradebook: queued, running, graded, not graded
    service.py       the grading loop: claim, grade on the workers, record, deadlines
    backends.py      where gradings run: the protocol, and warm local worker processes
    dask_backend.py  where gradings run with --scheduler: the workers of a Dask cluster
    publish.py       the batch's outputs rebuilt, debounced, off the request path
    student_view.py  a report as its student may read it, and its feedback page
    page.py          the hand-in page (GET /)

docs/hand-in-service.md is the instructor's and the student's guide, with the API; with `--lti`,
the service is also an LTI 1.3 tool of the course's LMS (grader/lti/, docs/lti.md).
"""
