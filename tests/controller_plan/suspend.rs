use crate::fixtures::*;
