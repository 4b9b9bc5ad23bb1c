"""Errors that reach the user as one line on stderr, with a documented exit code.

0  the command ran, whatever it found
1  `advisor check` failed
2  bad input (a path, a trace, a config, a size, a rule id): one line on stderr says why
3  `advisor analyze` on many runs: some could not be read (the readable ones are reported,
   the others listed with their reason)
130  stopped by Ctrl-C (143 by SIGTERM, 129 by SIGHUP): one line, temporary and partial files removed
     (advisor/cleanup.py)
"""

import difflib

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_SOME_RUNS_FAILED = 3


class AdvisorError(Exception):
    """A problem with what the user gave us (a path, a trace, a config): exit code 2."""

    exit_code = EXIT_USAGE


def did_you_mean(given: str, valid, kind: str) -> str:
    """The tail of an 'unknown X' message: the closest valid name first, then all of them.
    `kind` names the list ("ids", "keys"). Matching ignores case; `given` is only compared."""
    valid = list(valid)
    lowered = {v.lower(): v for v in valid}
    close = difflib.get_close_matches(str(given).lower(), list(lowered), n=1, cutoff=0.6)
    hint = f"did you mean {lowered[close[0]]!r}? " if close else ""
    return f"{hint}valid {kind}: {', '.join(valid)}"


def os_error_line(err: OSError) -> str:
    """One line for an OSError (a path too long, a permission, a full disk), without the traceback."""
    where = f"{err.filename}: " if err.filename else ""
    if len(where) > 200:
        where = f"{where[:100]}...{where[-60:]}"
    return f"{where}{err.strerror or err}"
