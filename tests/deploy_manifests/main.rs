//! `deploy/` as a cluster would read it: every manifest parses, and the properties the
//! webhooks' safety depends on hold (which kinds reach gangplank, how it fails, where it never
//! runs, how its pods are hardened and kept available, that the policies it serves are the
//! ones in `policies/`).
//!
//! The policies ConfigMaps come from `policies/kustomization.yaml`, which `deploy/` includes
//! as `../policies`; it must list every policy file the server loads (deploy/README.md).
//!
//! When `kubectl` is on PATH, its built-in kustomize also builds both variants (plain and
//! cert-manager) offline; otherwise that test says it skipped.
//!
//! One binary, split by topic: `files` (what kustomize applies), `webhooks` (the admission
//! configurations), `workload` (Deployment, PDB, Service, ServiceAccount), `network_policy`
//! (closed by default, and the install guide's patches), `cert_manager`
//! and `controller` (the components), `components` (the opt-in widening and narrowing
//! components), `first_day` (opt-in, fail-open, audit-first), `policies` (the ConfigMaps and
//! their file lists), `kustomize` (the builds), `combinations` (which component lists
//! build) and `install_namespace` (deploy/ rendered into another namespace).

mod cert_manager;
mod combinations;
mod components;
mod controller;
mod files;
mod first_day;
mod image_pinning;
mod install_namespace;
mod kustomize;
mod monitoring;
mod network_policy;
mod policies;
mod support;
mod webhooks;
mod workload;
