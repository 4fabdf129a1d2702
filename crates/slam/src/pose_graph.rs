//! SE(3) pose-graph optimisation (to be written).
