//! Table tests of the controller's pure planning core, `gangplank::controller::plan`,
//! porting the upstream training-operator controller cases (reference §6) with exact
//! condition lists, env values and actions.

mod fixtures;

mod backoff;
mod cleanup;
mod deadlines;
mod elastic;
mod env;
mod gang_reason;
mod mpi;
mod mpi_v1;
mod native_gang;
mod network_topology;
mod objects;
mod podgroup;
mod release_order;
mod restarting;
mod status_rules;
mod suspend;
mod watchdog;
