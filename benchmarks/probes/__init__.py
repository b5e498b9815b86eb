"""Replay issue #28's hostile probe (items 1-15) and the earlier rounds' hostile cases against the code as it is.

    python benchmarks/probe.py [--jobs 2] [--only TEXT[,TEXT...]] [--times] [--keep]

Not part of the test suite (each case has its test there): the whole list in one go, as a hostile user would try it,
so that the next round starts from a green probe. The serving items run against a real `python main.py task=serve`
process (a free port, a temporary run folder, a bearer token, the default no-LM program and serve.* defaults);
the command-line items run real `python main.py ...` processes, a few at a time (`--jobs`). Offline: no API key, no
network (HF_HUB_OFFLINE=1); everything is written under one temporary folder, removed at the end unless `--keep`.

Prints one line per probe, `ok  <item> <what>` or `FAIL <item> <what>: <what happened>`, as each finishes, then a
summary; exits 0 only if every probe is ok. `<item>` is the issue #28 item number, or `r3` for issue #21 (round 3)
and earlier rounds. `--only TEXT,...` runs the probes whose item and description contain one of the TEXTs.

The probe by area (`python benchmarks/probe.py` runs them all):
    harness.py        the report, the processes that run `main.py`, the input files, the checks
                      every probe shares (one error line, no traceback)
    cli.py            the command-line probes' registry and their order (slow ones last, merges after the shards)
    cli_runs.py       runs that must finish or fail one job: multirun, batch, fabrications, shards and merges,
                      forged case ids
    cli_refusals.py   one-line refusals: state files, compile, hostile inputs, settings, thread counts
    server.py         the real `task=serve` process, /health polled meanwhile, the HTTP helpers
    serve_load.py     items 1-3: big, long and slow requests answered in time
    serve_protocol.py item 14 and round 3: numbers, tokens, auth, bodies, error objects, forged ids
    serving.py        the serving probes' registry and order (one at a time; timing checks while no command runs)
    run.py            the command line (`--jobs`, `--only`, `--times`, `--keep`)
"""
