"""Apply Ash's database migrations: `python migrate.py [DATABASE]` (default: the configured one).

The steps and how they are applied live in `lib/migrations/`; this file is only the entry point.
"""

import sys

from lib.migrations import main

if __name__ == "__main__":
    sys.exit(main())
