"""ArchEHR-QA 2025 (BioNLP @ ACL 2025): one cited answer per case, scored for factuality and relevance."""
