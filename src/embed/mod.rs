//! embed stage (to be written).
