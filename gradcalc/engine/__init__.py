"""The engine: arrays (backend), the recorded graph, primitives and their derivative rules, the passes
over a graph (backward, batched Jacobians, expressions read back from it, the tutorials' view of it).

Knows nothing of the language or the command line; backend.py is the only module that imports NumPy.
"""
