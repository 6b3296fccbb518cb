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
//! configurations), `workload` (Deployment, PDB, Service, ServiceAccount), `cert_manager`
//! and `controller` (the components), `components` (the opt-in widening and narrowing
//! components), `policies` (the ConfigMaps and their file lists) and `kustomize` (the builds).

mod cert_manager;
mod components;
mod controller;
mod files;
mod image_pinning;
mod kustomize;
mod policies;
mod support;
mod webhooks;
mod workload;
