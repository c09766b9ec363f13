"""`python -m semsearch`: the CLI, for when the `semsearch` script is not on PATH."""

from semsearch.cli import main

if __name__ == "__main__":
    main(prog_name="semsearch")
