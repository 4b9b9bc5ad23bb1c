"""`python -m advisor`: the command line."""

from advisor.cli import main

main(prog_name="advisor")
