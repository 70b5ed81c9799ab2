"""#21 item 2: `gradcalc export --to numpy`'s value_and_grad against gradcalc's replay and jax.jit.

    python bench/bench_export.py [--jax-python /tmp/venv/bin/python] [--rounds 7]

Workloads (value and gradient of every leaf, two leaves given new values every call, as bench_replay.py's):

- toy network (samples/neuron.eq, five scalar leaves): the exported NumPy module's `value_and_grad(a=..., w1=...)`
  (Python floats in, so the module's arithmetic is Python's; "NumPy scalars": every leaf an np.float64);
  gradcalc's `program.run(values).grad(of="L")` (one Program: from its third run on it replays, compiled after
  eight); `jax.jit` of the exported JAX module's `value_and_grad` (result ready).
- the MLP (samples/mlp.eq, 8×4 inputs, 4×5 and 5×3 weights): the same three, W1 and b2 given new values.

Each side runs in its own process, the sides alternating round by round (a shared machine drifts); each child
reports the minimum over 5 repeats of the mean time of a batch of calls; a row's ratio is the median of the
rounds' ratios. The modules are exported once, before the rounds, into a temporary folder. Markdown on
standard output, progress on standard error.
"""

from __future__ import annotations

import argparse
import functools
import subprocess
import sys
import tempfile
from pathlib import Path

from benchkit import REPO, TIMER, alternating_rounds, child_json, ratio_table

WORKLOADS = {"toy": "samples/neuron.eq", "mlp": "samples/mlp.eq"}

COMMON = TIMER + """
import json, sys, numpy as np
sys.path.insert(0, FOLDER)
toy_points = [{"a": 2.0 + i / 7, "w1": 3.0 - i / 5} for i in range(16)]
toy_arrays = [{k: np.float64(v) for k, v in p.items()} for p in toy_points]
rng = np.random.default_rng(7)
mlp_points = [{"W1": rng.normal(size=(4, 5)), "b2": rng.normal(size=3)} for _ in range(16)]
state = {"i": 0}
def point(points):
    state["i"] = (state["i"] + 1) % 16
    return points[state["i"]]
"""

GRADCALC = COMMON + """
from gradcalc.program.api import Program
toy = Program.from_file("samples/neuron.eq")
mlp = Program.from_file("samples/mlp.eq")
toy_time = best(lambda: toy.run(point(toy_points)).grad(of="L"), 2000)  # the leaves are arrays inside gradcalc
print(json.dumps({"toy": toy_time, "toy, NumPy scalars": toy_time,
                  "mlp": best(lambda: mlp.run(point(mlp_points)).grad(of="L"), 1000)}))
"""

NUMPY = COMMON + """
import toy_numpy, mlp_numpy
toy_defaults = {k: np.float64(v) for k, v in (("w2", -1.0), ("w3", 0.5), ("w4", 4.0))}
print(json.dumps({"toy": best(lambda: toy_numpy.value_and_grad(**point(toy_points)), 20000),
                  "toy, NumPy scalars": best(lambda: toy_numpy.value_and_grad(**point(toy_arrays), **toy_defaults),
                                             20000),
                  "mlp": best(lambda: mlp_numpy.value_and_grad(**point(mlp_points)), 5000)}))
"""

JAX = COMMON + """
import jax
import toy_jax, mlp_jax
toy = jax.jit(toy_jax.value_and_grad)
mlp = jax.jit(mlp_jax.value_and_grad)
mlp_points = [{k: jax.numpy.asarray(v) for k, v in p.items()} for p in mlp_points]
toy_time = best(lambda: jax.block_until_ready(toy(**point(toy_points))), 5000)  # jit converts them either way
print(json.dumps({"toy": toy_time, "toy, NumPy scalars": toy_time,
                  "mlp": best(lambda: jax.block_until_ready(mlp(**point(mlp_points))), 5000)}))
"""


def export(folder: Path) -> None:
    """The modules, written by the tree's own `gradcalc export`."""
    for name, path in WORKLOADS.items():
        for to in ("numpy", "jax"):
            subprocess.run([sys.executable, "-m", "gradcalc", "export", path, "--to", to, "-o",
                            str(folder / f"{name}_{to}.py")], cwd=REPO, check=True, timeout=300,
                           env={**_env(), "PYTHONPATH": str(REPO)})


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def child(python: str, script: str, folder: Path) -> dict[str, float]:
    env = {**_env(), "PYTHONPATH": str(REPO)}
    return child_json(python, f"FOLDER = {str(folder)!r}\n" + script, env)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jax-python", help="an interpreter where jax imports (default: this one)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        export(folder)
        sides = {"export numpy": (sys.executable, NUMPY), "gradcalc replay": (sys.executable, GRADCALC),
                 "jax.jit": (args.jax_python or sys.executable, JAX)}
        rounds = alternating_rounds({side: functools.partial(child, *sides[side], folder) for side in sides},
                                    args.rounds)
    ratio_table(rounds, "export numpy", "workload", lambda key: f"{key} value_and_grad")

if __name__ == "__main__":
    main()
