//! The admission webhooks over real HTTPS on 127.0.0.1, as the kube-apiserver calls them:
//! generated CA, a client that verifies it, AdmissionReview JSON in, patches applied.
//! One test binary, one module per topic.

mod bad_input;
mod cli;
mod client_auth;
mod differential;
mod drain;
mod exemptions;
mod handoff;
#[path = "../support/held_registry.rs"]
mod held_registry;
mod hostile_bodies;
mod in_process;
mod limits;
mod load;
mod metrics_exposition;
mod probes;
mod reload;
mod review_budget;
mod rotation;
mod support;
mod webhooks;
mod withheld_names;
