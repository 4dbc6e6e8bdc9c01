//! extract stage (to be written).
