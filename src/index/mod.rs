//! index stage (to be written).
