//! Trajectory metrics (to be written).
