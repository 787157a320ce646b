"""`python -m studio_align.cli` runs the `studio-align` command line."""

from studio_align.cli import main

main(prog_name="studio-align")
