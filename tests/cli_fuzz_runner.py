"""Runs many ``opskit`` command lines in one process, for tests/unit/test_cli_fuzz.py.

Usage: ``python tests/cli_fuzz_runner.py CASES.json``, where the file holds a list
of ``{"argv": [...], "env": {...}}`` (argument strings, ``"\\udcXX"`` surrogates
standing for argv bytes that are not UTF-8 as Python decodes them; environment
variables set for that case only). For each case it writes ``START <i>``
to stdout before running it (so a crash or a hang names its case), then one
JSON line ``{"i", "code", "out", "err"}`` with what ``opskit.cli.main.main``
returned and printed. The parent runs this in a subprocess: a signal, a hang
(the subprocess timeout) or output on the real file descriptors is caught there.
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from typing import Any


def main() -> int:
    with open(sys.argv[1], encoding="utf-8", errors="surrogatepass") as f:
        cases: list[dict[str, Any]] = json.load(f)
    from opskit.cli.main import main as opskit_main
    from opskit.cli.main import register_all

    register_all()  # every command, as a user's process would have it
    real = sys.stdout
    for i, case in enumerate(cases):
        real.write(f"START {i}\n")
        real.flush()
        saved = {k: os.environ.get(k) for k in case["env"]}
        os.environ.update(case["env"])
        out, err = io.StringIO(), io.StringIO()
        began = time.monotonic()
        with redirect_stdout(out), redirect_stderr(err):
            code = opskit_main(list(case["argv"]))
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        real.write(json.dumps({"i": i, "code": code, "s": round(time.monotonic() - began, 3), "out": out.getvalue()[-2000:],
                               "err": err.getvalue()[-4000:]},
                              ensure_ascii=True) + "\n")
        real.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
