"""The argument parser of every `grade` command: bad usage is one sentence and exit 2."""

from __future__ import annotations

import argparse
import difflib

from grader.errors import UsageError


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
