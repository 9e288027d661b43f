// The Activities module; see Docs/Architecture.md.
