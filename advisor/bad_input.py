"""The command line's bad input: every error a user can cause (a path, a trace, a config, a rule id,
an unknown option or a bad choice) is one line on stderr, `advisor: error: ...`, and exit code 2."""

from __future__ import annotations

import functools
import sys

import click

from .errors import EXIT_USAGE, AdvisorError, os_error_line
from .report.escape import visible


def fail(message: str) -> None:
    click.echo(f"advisor: error: {visible(message)}", err=True)
    sys.exit(EXIT_USAGE)


def user_errors(fn):
    """Turn the errors a user can cause into one line on stderr and exit code 2."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from advisor.workloads.config import ConfigError
        try:
            return fn(*args, **kwargs)
        except (AdvisorError, ConfigError) as err:
            fail(str(err))
        except OSError as err:
            fail(os_error_line(err))
        except KeyboardInterrupt:
            from .cleanup import interrupted
            interrupted()
    return wrapper


class Group(click.Group):
    """The command group whose usage errors (an unknown option, a bad choice, a missing argument) are
    bad input like any other: one line on stderr and exit 2, where click prints usage and a hint."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as err:
            where = err.ctx.command_path if err.ctx is not None else prog_name or "advisor"
            fail(f"{err.format_message().rstrip('.')}: see '{where} --help'")
        except click.ClickException as err:
            err.show()
            sys.exit(err.exit_code)
        except click.Abort:
            click.echo("advisor: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)
