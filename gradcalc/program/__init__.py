"""The language run on the engine: builtins, the interpreter (builder), the `Program`/`Run` API,
and the limits a run is held to (memory, time)."""
