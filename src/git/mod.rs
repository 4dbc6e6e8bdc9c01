//! git stage (to be written).
