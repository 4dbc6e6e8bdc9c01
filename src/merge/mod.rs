//! merge stage (to be written).
