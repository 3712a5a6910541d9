"""The long fuzz campaign over every input kind (see tests/fuzz/campaign.py):

    .venv/bin/python bench/fuzz.py --inputs 200000 --jobs 2 --keep /tmp/fuzz-findings

prints a table per kind (ok, clean error, crash, hang, abort, multi-line message, self-reported
bug; mean and max seconds, peak RSS) and the first findings; exit status 1 if any.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz.campaign import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
