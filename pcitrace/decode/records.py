"""Transaction records: defined in pcitrace.records (the bottom layer); this old import path
re-exports them while the callers move."""

from pcitrace.records import (FIELD_NAMES, FINDING_DTYPE, RECORD_DTYPE, WORD_DTYPE, diff_records,  # noqa: F401
                              empty_records, record_to_dict, records_from_dicts, records_from_jsonl)
