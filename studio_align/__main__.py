"""`python -m studio_align` is the `studio-align` command."""

from studio_align.cli import main

if __name__ == "__main__":
    main()
