"""Errors that reach the user as one line on stderr, with a documented exit code."""

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2


class AdvisorError(Exception):
    """A problem with what the user gave us (a path, a trace, a config): exit code 2."""

    exit_code = EXIT_USAGE
