"""ArchEHR-QA 2026: the official XML/key formats, submission files and scorers."""
