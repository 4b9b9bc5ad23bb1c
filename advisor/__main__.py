"""`python -m advisor`: the command line."""

from advisor.cli import entry

entry()
