//! serve stage (to be written).
