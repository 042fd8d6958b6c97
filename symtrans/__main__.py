"""``python -m symtrans``: the same as the ``symtrans`` command."""

import sys

from symtrans.cli import main

if __name__ == "__main__":
    sys.exit(main())
