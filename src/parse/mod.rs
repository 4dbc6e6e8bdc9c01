//! parse stage (to be written).
