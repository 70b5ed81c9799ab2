"""The language: text to syntax tree (the grammar, the parser, claims in gradcalc's notation or LaTeX).

Imports neither NumPy nor the engine. One exception, lazy: reading a claim such as `sin x`
asks program.builtins which names are functions (parser.is_function).
"""
