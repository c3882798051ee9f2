"""Which environment switches change floating-point results on this machine?

    python scripts/kernel_switches.py
    python scripts/kernel_switches.py --npy-disable baseline   # the value .ci/run uses

Computes a fixed set of reductions, GEMMs, elementwise functions and factorisations with
torch, NumPy and SciPy, once with the environment as it is and once under each switch (a fresh
interpreter each time, since the libraries read their switches when they load), and prints, per
switch, which results differ in at least one bit from the plain run. A switch that changes no
bit here cannot stand in for another machine in ``.ci/run``'s second pass; one that does
changes the kernels, the accumulation order or the threading the way another CPU would.

The switches: ``ATEN_CPU_CAPABILITY`` (torch's vectorised kernels: ``default``, ``avx2``),
``NPY_DISABLE_CPU_FEATURES`` (NumPy's dispatched SIMD loops), ``OPENBLAS_CORETYPE`` (the kernels
of the OpenBLAS that NumPy and SciPy ship), ``MKL_CBWR`` (torch's MKL), and one thread for torch
(``OMP_NUM_THREADS``) and for OpenBLAS (``OPENBLAS_NUM_THREADS``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys


def npy_disable(level: str) -> str:
    """The ``NPY_DISABLE_CPU_FEATURES`` value that leaves NumPy's loops at ``level``.

    ``"avx2"``: the AVX-512 targets off; ``"baseline"``: every dispatched target off. The names
    are the installed NumPy's own (they changed in NumPy 2.4) and only those this CPU has (NumPy
    warns about the others), so the value is valid here; empty when nothing is to disable.
    """
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # NumPy < 2
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    found = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    if level == "avx2":
        found = [f for f in found if f.startswith(("AVX512", "X86_V4"))]
    return " ".join(found)


def results() -> dict[str, str]:
    """A short hash of each result's bytes."""
    import numpy as np
    import scipy.linalg
    import scipy.linalg.blas as blas
    import scipy.special
    import torch

    def h(x: object) -> str:
        arr = x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
        return hashlib.sha1(np.ascontiguousarray(arr).tobytes()).hexdigest()[:12]

    # inputs that no switch changes: NumPy's generator, and an SPD matrix of small integers
    # (its product is exact in any summation order)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4097, 257)).astype(np.float32)
    y = rng.standard_normal((257, 129)).astype(np.float32)
    a, b = torch.from_numpy(x), torch.from_numpy(y)
    gen = torch.Generator().manual_seed(0)
    ints = rng.integers(-3, 4, size=(300, 257)).astype(np.float64)
    spd = ints.T @ ints + 257 * np.eye(257)
    return {
        "torch randn (the generator's draws)": h(torch.randn(999, generator=gen)),
        "torch sum f32, across rows": h(a.sum(0)), "torch sum f32, along rows": h(a.sum(1)),
        "torch sum f64, along rows": h(a.double().sum(1)), "torch sum f32, all": h(a.sum()),
        "torch mm f32": h(a @ b), "torch mm f64": h(a.double() @ b.double()),
        "torch mm f32, M=8": h(b.T[:8] @ a.T),
        "torch exp f32": h(torch.exp(a)), "torch sigmoid f32": h(torch.sigmoid(a)),
        "torch logsumexp f32": h(torch.logsumexp(a, 1)), "torch softmax f32": h(a.softmax(1)),
        "torch cholesky f64": h(torch.linalg.cholesky(torch.from_numpy(spd))),
        "numpy sum f32, across rows": h(x.sum(0)), "numpy sum f32, along rows": h(x.sum(1)),
        "numpy sum f64, along rows": h(x.astype(np.float64).sum(1)),
        "numpy exp f32": h(np.exp(x)), "numpy exp f64": h(np.exp(x.astype(np.float64))),
        "numpy log f32": h(np.log(np.abs(x) + 1)), "numpy tanh f32": h(np.tanh(x)),
        "numpy matmul f32 (OpenBLAS)": h(x @ y),
        "numpy matmul f64 (OpenBLAS)": h(x.astype(np.float64) @ y.astype(np.float64)),
        "numpy cholesky f64": h(np.linalg.cholesky(spd)),
        "scipy sgemm": h(blas.sgemm(1.0, x, y)),
        "scipy dgemm": h(blas.dgemm(1.0, x.astype(np.float64), y.astype(np.float64))),
        "scipy cholesky f64": h(scipy.linalg.cholesky(spd, lower=True)),
        "scipy logsumexp f64": h(scipy.special.logsumexp(x.astype(np.float64), axis=1)),
    }


def switches() -> dict[str, dict[str, str]]:
    return {
        "ATEN_CPU_CAPABILITY=default": {"ATEN_CPU_CAPABILITY": "default"},
        "ATEN_CPU_CAPABILITY=avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
        "NPY_DISABLE_CPU_FEATURES=<above AVX2>": {"NPY_DISABLE_CPU_FEATURES": npy_disable("avx2")},
        "NPY_DISABLE_CPU_FEATURES=<all dispatched>": {
            "NPY_DISABLE_CPU_FEATURES": npy_disable("baseline")},
        "OPENBLAS_CORETYPE=Haswell": {"OPENBLAS_CORETYPE": "Haswell"},
        "OPENBLAS_CORETYPE=Sandybridge": {"OPENBLAS_CORETYPE": "Sandybridge"},
        "MKL_CBWR=COMPATIBLE": {"MKL_CBWR": "COMPATIBLE"},
        "OMP_NUM_THREADS=1 (torch, and OpenBLAS)": {"OMP_NUM_THREADS": "1"},
        "OPENBLAS_NUM_THREADS=1": {"OPENBLAS_NUM_THREADS": "1"},
    }


def main() -> int:
    if "--child" in sys.argv:
        json.dump(results(), sys.stdout)
        return 0
    if "--npy-disable" in sys.argv:  # for .ci/run: the value of NPY_DISABLE_CPU_FEATURES
        print(npy_disable(sys.argv[sys.argv.index("--npy-disable") + 1]))
        return 0

    def child(extra: dict[str, str]) -> dict[str, str]:
        out = subprocess.run([sys.executable, __file__, "--child"], env={**os.environ, **extra},
                             capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    import numpy
    import scipy
    import torch

    print(f"torch {torch.__version__} (CPU capability {torch.backends.cpu.get_cpu_capability()}), "
          f"numpy {numpy.__version__}, scipy {scipy.__version__}")
    plain = child({})
    for name, extra in switches().items():
        other = child(extra)
        changed = [k for k in plain if other[k] != plain[k]]
        print(f"{name}: {'; '.join(changed) if changed else 'no result changed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
