//! query stage (to be written).
