//! Pre-commit hook (to be written).
