"""The notation claims are written in, read into the language: what a student types, and what the
program layer means by it.

- juxtaposition.py: a claim's tokens as answers are written (2x, sin x, W x); `NOTATION`, the dialect the
  program layer parses programs (their check statements), claims and values in; what a product written
  side by side means (`juxtaposed`: a scalar scales, W x is a matrix product, δ xᵀ an outer product).
- latex.py: LaTeX (and one-character fractions) made gradcalc text, each character knowing where it was written.
- reading.py: an answers file, a --claim or a model's check statements, into claims (or lines that do not parse);
  a claim's reach (`claim_context`: no file, random draws seeded by its own text).
- resolving.py: a claim finished against the program's names before it is judged (x(1 + x), ab, w_1).

The language's own syntax (the grammar's claims, typographic operators, superscripts) stays in
language/; this package builds on it and on the builtins' names.
"""
