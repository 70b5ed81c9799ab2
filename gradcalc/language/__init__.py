"""The language: text to syntax tree (the grammar, the parser, the syntax tree).

Imports neither NumPy, nor the engine, nor anything above it: which names are builtin functions
and how claims are written (`sin x`, LaTeX) come in a `parser.Dialect` from the program layer
(program/notation/).
"""
