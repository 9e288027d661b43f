// The EventKernel module; see Docs/Architecture.md.
