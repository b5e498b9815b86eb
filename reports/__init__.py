"""Self-contained HTML views of runs, sweeps and compile runs (inline CSS/JS/SVG; no network, no CDN)."""
