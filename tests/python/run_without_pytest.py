"""Runs the torch-free source checks (test_packaging.py, test_decode_source.py) without pytest, for
CTest on machines that have neither pytest nor torch (CI): every `test_*` function of each module named
on the command line is called; a failure prints its traceback. Exit status 1 if any check failed, a
module had no checks or a check takes arguments (a pytest fixture or parameter this runner cannot give).
"""
import importlib
import inspect
import os
import sys
import traceback


def main(names):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    failed = ran = 0
    for name in names:
        module = importlib.import_module(name)
        checks = [(n, f) for n, f in vars(module).items() if n.startswith("test_") and inspect.isfunction(f)]
        if not checks:
            print(f"{name}: no test_ functions: nothing checked")
            failed += 1
        for fname, fn in checks:
            if inspect.signature(fn).parameters:
                print(f"FAILED {name}.{fname}: takes arguments (run it with pytest)")
                failed += 1
                continue
            try:
                fn()
                ran += 1
                print(f"ok     {name}.{fname}")
            except Exception:  # noqa: BLE001 - report every failure, then exit non-zero
                failed += 1
                print(f"FAILED {name}.{fname}")
                traceback.print_exc()
    print(f"{ran} passed, {failed} failed")
    return 1 if failed or not ran else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
