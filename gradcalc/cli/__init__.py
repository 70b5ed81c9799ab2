"""The command line: entry (the console script's first lines), app (the Typer commands), and their
output: render (text tables), jsonout (--json), drawing (pictures of the graph).

Deliberately empty: `gradcalc.cli.entry` must run before Typer, Rich or NumPy load.
"""
