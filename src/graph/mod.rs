//! graph stage (to be written).
