// The ActivityWorkload module; see Docs/Architecture.md.
