"""Official task file formats (loaders, submission writers) and scorers."""
