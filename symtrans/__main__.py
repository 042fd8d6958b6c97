"""``python -m symtrans``: the same as the ``symtrans`` command."""

import sys

from symtrans.cli import run

if __name__ == "__main__":
    sys.exit(run())
