//! cache stage (to be written).
