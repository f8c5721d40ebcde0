//! End-to-end tests of the workspace live in `tests/`; their data in `data/`.
