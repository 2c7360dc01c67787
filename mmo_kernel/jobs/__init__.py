"""Worker jobs: records, admission, waiting, results, controls (spec 04)."""
