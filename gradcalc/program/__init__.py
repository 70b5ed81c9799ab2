"""The language run on the engine: builtins, the checker and the interpreter, the `Program`/`Run` API,
and the limits a run is held to (memory, time)."""
