#!/usr/bin/env python3
"""Mutation check of the deviceless GPU tests (docs/gpu.md): puts each mutation of a list
(nccl.py, local.py, part.py, probe.py, cuda.py, cuda_part.py, cuda_plan.py, cli.py here) into its
source file in turn, rebuilds the test's program in BUILD (the list's TARGET, else its TEST), runs it, and says whether the test caught it (failed)
or not; the source is restored after each, and at the end, whatever happens. Run from the
repository root, with nothing uncommitted in the mutated files:

    python3 tests/gpu_emu/mutations/run.py BUILD [nccl local part probe cuda cuda_part cuda_plan cli]
    python3 tests/gpu_emu/mutations/run.py BUILD nccl:M8,M9     only those of a list

Each mutation takes a build and a run (a few seconds; the nccl ones that break the bounds wait
for the emulation's bound, up to 80 s; the cuda ones train nets, 15-40 s, and W3 hangs until
ctest's 240 s). Exit status 0 when every mutation not marked "not expected to show" was
caught."""
import importlib.util
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    sets = sys.argv[2:] or ["nccl", "local", "part", "probe", "cuda", "cuda_part", "cuda_plan", "cli"]
    missed = 0
    for arg in sets:
        name, _, only = arg.partition(":")
        mod = load(name)
        if only:
            mod.M = [m for m in mod.M if m[0] in only.split(",")]
        path = mod.SOURCE
        target = getattr(mod, "TARGET", mod.TEST)
        original = open(path).read()
        try:
            for mid, what, reps in mod.M:
                text = original
                for old, new in reps:
                    if text.count(old) != 1:
                        print(f"{mid}: its text is not in {path} once: the list is out of date", flush=True)
                        return 2
                    text = text.replace(old, new)
                open(path, "w").write(text)
                b = subprocess.run(["cmake", "--build", build, "--target", target], capture_output=True, text=True)
                if b.returncode:
                    print(f"{mid}: does not build\n{b.stdout[-800:]}{b.stderr[-800:]}", flush=True)
                    return 2
                t0 = time.monotonic()
                r = subprocess.run(["ctest", "--test-dir", build, "-R", f"^{mod.TEST}$", "--timeout", "240"],
                                   capture_output=True, text=True)
                caught = r.returncode != 0
                quiet = "not expected to show" in what
                missed += not caught and not quiet
                print(f"{mid}: {'caught' if caught else 'NOT caught'} ({time.monotonic() - t0:.0f} s): {what}",
                      flush=True)
        finally:
            open(path, "w").write(original)
            subprocess.run(["cmake", "--build", build, "--target", target], capture_output=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
