"""`task=serve`: a program over HTTP (FastAPI), offline by default."""
