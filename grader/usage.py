"""The argument parser of every `grade` command (bad usage is one sentence and exit 2), and how
each `grade` (the instructor's and the student pack's) ends: `exit_status`."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable

from grader import interrupts
from grader.errors import GraderError, UsageError
from grader.inert import MESSAGE_LIMIT, terminal


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors are a UsageError (one sentence, exit 2), with the flag
    meant when an unknown one is close to it."""

    def error(self, message: str):  # one sentence and exit 2, as for any bad usage
        unknown = message.split("unrecognized arguments: ", 1)
        if len(unknown) == 2:
            flag = unknown[1].split()[0]
            close = difflib.get_close_matches(flag, list(self._option_string_actions), n=1)
            if close:
                message += f" (did you mean {close[0]}?)"
        raise UsageError(message)


def exit_status(run: Callable[[], int], *, terminated: str = "terminated", interrupted: str = "interrupted",
                bug: str | None = None) -> int:
    """`run()`'s exit status, with every error and signal that ends it mapped to its code and
    told in one line on stderr: a GraderError its `exit_code`; SIGTERM 143 ("grade: " and
    `terminated`); Ctrl-C 130 (`interrupted`); 141 when the reader of the output left (`| head`),
    quietly. Any other exception is a grader bug: with `bug`, one sentence ending in it and exit 3;
    without, it propagates (its traceback is for whoever maintains the grader)."""
    try:
        return run()
    except GraderError as exc:
        print(f"grade: {terminal(exc, MESSAGE_LIMIT)}", file=sys.stderr)
        return exc.exit_code
    except interrupts.Terminated:
        print(f"grade: {terminated}", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"grade: {interrupted}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of our output left (`grade validate | head -3`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the last flush must not fail again
        return 141  # 128 + SIGPIPE, what a shell shows for a writer whose reader left (`yes | head`)
    except Exception as exc:
        if bug is None:
            raise
        print(f"grade: the grader failed ({terminal(f'{type(exc).__name__}: {exc}', MESSAGE_LIMIT)}), a bug: "
              f"{bug}", file=sys.stderr)
        return 3
