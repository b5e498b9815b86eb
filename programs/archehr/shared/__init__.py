"""What several ArchEHR stages share to read a note and an answer without an LM; it imports none of the stages."""
