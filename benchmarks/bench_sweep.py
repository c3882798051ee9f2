"""Benchmark: a sweep of 16 runs on a Dask LocalCluster of 2 worker processes against 1.

Every run is the same single-threaded, CPU-bound experiment (``td_learning`` with ``--steps``
expected updates on the random chain and on Baird's counterexample: Python and small tensor
operations, about a second each at the default 600 steps), so two workers on two cores
should finish the sweep in about half the time. The clusters are started before the clock
starts (start-up is printed separately), and the two sweeps alternate over ``--rounds`` rounds;
the script prints the median wall time of each and the median of the per-round speed-ups.

    python benchmarks/bench_sweep.py            # 16 runs, 3 rounds
    python benchmarks/bench_sweep.py --quick    # 2 tiny runs, 1 round (a smoke run)
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

from toolkit.lab import plan_one
from toolkit.lab.execute.local import run_all
from toolkit.lab.results.schema import ExecutorConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=600,
                        help="random-chain steps and Baird sweeps of each run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.steps, args.rounds = 2, 20, 1

    import dask
    import distributed
    from distributed.security import Security

    logging.getLogger("distributed").setLevel(logging.WARNING)
    # TLS, as every cluster the lab reaches: a throw-away CA whose files the sweep is handed
    security = Security.temporary()
    clusters = {}
    seconds: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        pem = {name: Path(tmp) / f"{name}.pem" for name in ("ca", "cert", "key")}
        for name, text in zip(pem, (security.tls_ca_file, security.tls_client_cert,
                                    security.tls_client_key)):
            pem[name].write_text(text)
        try:
            for n in (1, 2):
                t0 = time.perf_counter()
                with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
                    clusters[n] = distributed.LocalCluster(
                        n_workers=n, threads_per_worker=1, processes=True, security=security,
                        dashboard_address=":0", silence_logs=logging.ERROR)
                print(f"LocalCluster with {n} worker(s) started in "
                      f"{time.perf_counter() - t0:.1f} s")
            params = {"chain_steps": args.steps, "baird_sweeps": args.steps,
                      "a_split_steps": min(200, args.steps), "log_every": min(100, args.steps)}
            runs = [plan_one("td_learning", params, seed=seed, device="cpu",
                             dtype="float64", output_dir=Path(tmp) / "results")
                    for seed in range(args.runs)]
            for r in range(args.rounds):
                for n in ((1, 2) if r % 2 == 0 else (2, 1)):
                    spec = ExecutorConfig(kind="dask", address=clusters[n].scheduler_address,
                                          tls_ca_file=str(pem["ca"]), tls_cert=str(pem["cert"]),
                                          tls_key=str(pem["key"]))
                    t0 = time.perf_counter()
                    outcomes, status = run_all(runs, executor=spec, quiet=True)
                    seconds[n].append(time.perf_counter() - t0)
                    if status or len(outcomes) != args.runs:
                        raise SystemExit(f"sweep failed: {[o.error for o in outcomes]}")
        finally:
            for cluster in clusters.values():
                cluster.close()
    speedups = [a / b for a, b in zip(seconds[1], seconds[2])]
    print(f"{args.runs} runs of td_learning ({args.steps} steps), {args.rounds} round(s):")
    for n in (1, 2):
        print(f"  {n} worker(s): median {statistics.median(seconds[n]):.2f} s "
              f"(rounds: {', '.join(f'{s:.2f}' for s in seconds[n])})")
    print(f"  speed-up ratio 1 worker / 2 workers = {statistics.median(speedups):.2f}x "
          f"(rounds {min(speedups):.2f}..{max(speedups):.2f}; expected >= 1.7 on 2 free cores)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
