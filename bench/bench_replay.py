"""#21 items 2 and 3: a program run again with new values (replayed), and a Hessian with its run.

    python bench/bench_replay.py --torch-python /tmp/venv-torch-gcheck/bin/python \
        --jax-python /tmp/venv-jax/bin/python [--rounds 7]

Workloads, each side in its own process, the sides alternating round by round (a shared machine drifts):

- toy network: `program.run(values)` + `run.grad(of="L")` with two of its five leaves given new values every
  call (one Program, so from its third run on it replays), against PyTorch eager (five leaf tensors made,
  the same four lines, `torch.autograd.grad`) and `jax.jit(jax.value_and_grad(f, argnums=(0..4)))` (result
  ready). Also the same Program's `run()` + grad, run(values) + grad reading every value first (a replayed
  run makes its nodes only when asked: values() asks, value(name) and grad do not), and run(values) without
  the replay (a fresh Program each call is not it: that parses; `replays` is cleared instead), as diagnostics.
- Hessian of `sum(x^4) + sum(x[:-1]*x[1:])` at n = 100 with its run (`run(values).hessian`) against
  `torch.func.hessian(f)(x)`, and `torch.autograd.functional.hessian(f, x, vectorize=True)` (bench_jacobian's).

Each child reports the minimum over 5 repeats of the mean time of a batch of calls; a row's ratio is the
median of the rounds' ratios. Markdown on standard output, progress on standard error.
"""

from __future__ import annotations

import argparse
import functools
import sys

from benchkit import REPO, TIMER, alternating_rounds, child_json, ratio_table

TOY = "a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4\nb = w1*a\nc = w2*a\nd = w3*b + w4*c\nL = 10 - d"
HESS = "x = 0\nL = sum(x^4) + sum(x[:-1] * x[1:])"

GRADCALC = TIMER + """
import json, numpy as np
from gradcalc.program.api import Program
toy = Program(TOY)
points = [{"a": 2.0 + i / 7, "w1": 3.0 - i / 5} for i in range(16)]
state = {"i": 0}
def values():
    state["i"] = (state["i"] + 1) % 16
    return points[state["i"]]
def replayed():
    toy.run(values()).grad(of="L")
def interpreted():
    toy.replays.clear()
    toy.run(values()).grad(of="L")
def plain():
    toy.run().grad(of="L")
def noded():
    run = toy.run(values())
    run.values()
    run.grad(of="L")
x = np.random.default_rng(100).normal(size=100)
hess = Program(HESS)
def hessian():
    hess.run({"x": x}).hessian(of="L", wrt=["x"])
print(json.dumps({"toy run(values)+grad": best(replayed, 2000), "toy run()+grad": best(plain, 2000),
                  "toy run(values)+values()+grad, its nodes made": best(noded, 2000),
                  "toy run(values)+grad, interpreted": best(interpreted, 2000),
                  "hessian n=100 with its run": best(hessian, 300)}))
"""
GRADCALC = GRADCALC.replace('"hessian n=100 with its run": best(hessian, 300)',
                            '"hessian n=100 with its run": h, '
                            '"hessian n=100 with its run, vs autograd.functional.hessian(vectorize=True)": h')
GRADCALC = GRADCALC.replace("print(json.dumps(", "h = best(hessian, 300)\nprint(json.dumps(")

TORCH = TIMER + """
import json, torch
torch.set_num_threads(1)
points = [(2.0 + i / 7, 3.0 - i / 5) for i in range(16)]
state = {"i": 0}
def toy():
    state["i"] = (state["i"] + 1) % 16
    a0, w10 = points[state["i"]]
    a, w1, w2, w3, w4 = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (a0, w10, -1.0, 0.5, 4.0))
    b = w1 * a
    c = w2 * a
    d = w3 * b + w4 * c
    L = 10 - d
    torch.autograd.grad(L, [a, w1, w2, w3, w4])
x = torch.from_numpy(__import__("numpy").random.default_rng(100).normal(size=100))
f = lambda x: (x ** 4).sum() + (x[:-1] * x[1:]).sum()
hessian = lambda: torch.func.hessian(f)(x)
vectorized = lambda: torch.autograd.functional.hessian(f, x, vectorize=True)
print(json.dumps({"toy run(values)+grad": best(toy, 2000), "hessian n=100 with its run": best(hessian, 300),
                  "hessian n=100 with its run, vs autograd.functional.hessian(vectorize=True)": best(vectorized, 300)}))
"""

JAX = TIMER + """
import json, jax
jax.config.update("jax_enable_x64", True)
points = [(2.0 + i / 7, 3.0 - i / 5) for i in range(16)]
state = {"i": 0}
def f(a, w1, w2, w3, w4):
    b = w1 * a
    c = w2 * a
    d = w3 * b + w4 * c
    return 10 - d
g = jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2, 3, 4)))
def toy():
    state["i"] = (state["i"] + 1) % 16
    a, w1 = points[state["i"]]
    jax.block_until_ready(g(a, w1, -1.0, 0.5, 4.0))
print(json.dumps({"toy run(values)+grad": best(toy, 2000)}))
"""


def child(python: str, script: str, env_tree: bool) -> dict[str, float]:
    import os

    env = dict(os.environ)
    if env_tree:
        env["PYTHONPATH"] = str(REPO)
    else:
        env.pop("PYTHONPATH", None)
    return child_json(python, f"TOY = {TOY!r}\nHESS = {HESS!r}\n" + script, env, timeout=600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", help="an interpreter where torch imports")
    parser.add_argument("--jax-python", help="an interpreter where jax imports")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    sides = {"gradcalc": (sys.executable, GRADCALC, True)}
    if args.torch_python:
        sides["PyTorch"] = (args.torch_python, TORCH, False)
    if args.jax_python:
        sides["JAX"] = (args.jax_python, JAX, False)
    rounds = alternating_rounds({side: functools.partial(child, *sides[side]) for side in sides}, args.rounds)
    ratio_table(rounds, "gradcalc")

if __name__ == "__main__":
    main()
