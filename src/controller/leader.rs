//! Leader election on a `coordination.k8s.io/v1` Lease, so that two controller replicas are
//! safe: only the holder reconciles.
//!
//! Entry point: [`Elector::acquire`] waits until this replica holds the Lease, then
//! [`Elector::keep`] renews it and returns when it is lost. client-go's rules, kept small:
//! a Lease is free when absent or when `renewTime + leaseDurationSeconds` has passed; every
//! write is a replace carrying the read `resourceVersion`, so of two replicas racing for a
//! free Lease exactly one wins (the other gets 409 and tries again later). A replica that
//! cannot renew within the lease duration stops leading: the caller exits, and its
//! Deployment restarts it as a follower.
//!
//! # Errors
//! [`Elector::acquire`] retries what may pass (the API server unreachable, a conflict, a
//! 5xx) for ever, logging each failure. It gives up, with a [`LeaseError`], on what never
//! passes by waiting: the Lease namespace does not exist (the create answers 404 naming
//! it), or this identity may not read or write Leases there (403 for a whole lease
//! duration; a shorter 403 is RBAC still being applied beside the Deployment).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};

use super::Timestamp;

/// Why leader election cannot succeed however long it retries.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The create of the Lease answered 404 for its namespace.
    #[error("the Lease namespace {namespace:?} does not exist")]
    NamespaceMissing {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    /// Reading or writing the Lease answered 403 for a whole lease duration.
    #[error("not allowed to {verb} Leases (coordination.k8s.io) in namespace {namespace:?}")]
    Forbidden {
        namespace: String,
        verb: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// How the Lease is held. Defaults are client-go's: 15 s lease, renew every 5 s.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// This replica (its pod name, plus a random suffix so a restarted pod is a new holder).
    pub identity: String,
    pub lease_duration: Duration,
    pub retry_period: Duration,
}

pub struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
}

impl LeaseError {
    /// The API server's own words (its Status message), for the log.
    pub fn api_message(&self) -> String {
        let (LeaseError::NamespaceMissing { source, .. } | LeaseError::Forbidden { source, .. }) =
            self;
        match source {
            kube::Error::Api(status) => status.message.clone(),
            other => crate::error_chain(other),
        }
    }
}

/// What one attempt at the Lease found.
enum Attempt {
    Held,
    HeldByOther(String),
}

/// A failed attempt: the request (`get`, `create`, `update`) and the API's answer.
struct Failure {
    verb: &'static str,
    error: kube::Error,
}

impl Failure {
    fn on(verb: &'static str) -> impl FnOnce(kube::Error) -> Failure {
        move |error| Failure { verb, error }
    }

    fn code(&self) -> Option<u16> {
        match &self.error {
            kube::Error::Api(s) => Some(s.code),
            _ => None,
        }
    }

    /// A 404 on create names the missing namespace (`namespaces "x" not found`); any other
    /// 404 (an API server without coordination.k8s.io/v1) is not about the namespace.
    fn namespace_missing(&self) -> bool {
        match &self.error {
            kube::Error::Api(s) => {
                self.verb == "create" && s.code == 404 && s.message.contains("namespaces")
            }
            _ => false,
        }
    }
}

impl Elector {
    pub fn new(client: kube::Client, config: LeaseConfig) -> Elector {
        Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
        }
    }

    /// Waits until this replica holds the Lease. Transient API errors are logged and
    /// retried; see the module doc for the errors it returns.
    pub async fn acquire(&self) -> Result<(), LeaseError> {
        let mut logged_holder = None;
        let mut forbidden_since = None;
        loop {
            match self.try_hold().await {
                Ok(Attempt::Held) => {
                    tracing::info!(lease = %self.config.name, identity = %self.config.identity, "leading");
                    return Ok(());
                }
                Ok(Attempt::HeldByOther(holder)) => {
                    forbidden_since = None;
                    if logged_holder.as_ref() != Some(&holder) {
                        tracing::info!(lease = %self.config.name, %holder, "waiting: another replica leads");
                        logged_holder = Some(holder);
                    }
                }
                Err(f) if f.namespace_missing() => {
                    return Err(LeaseError::NamespaceMissing {
                        namespace: self.config.namespace.clone(),
                        source: f.error,
                    });
                }
                Err(f) if f.code() == Some(403) => {
                    let since = *forbidden_since.get_or_insert_with(tokio::time::Instant::now);
                    if since.elapsed() >= self.config.lease_duration {
                        return Err(LeaseError::Forbidden {
                            namespace: self.config.namespace.clone(),
                            verb: f.verb,
                            source: f.error,
                        });
                    }
                    tracing::warn!(
                        lease = %self.config.name,
                        namespace = %self.config.namespace,
                        verb = f.verb,
                        error = %f.error,
                        "leader election: forbidden; retrying for {:?} in case RBAC is still being applied",
                        self.config.lease_duration,
                    );
                }
                Err(f) => {
                    forbidden_since = None;
                    tracing::warn!(lease = %self.config.name, namespace = %self.config.namespace, verb = f.verb, error = %f.error, "leader election; retrying");
                }
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renews the Lease every retry period; returns (with why) once it could not be renewed
    /// for a whole lease duration, or another replica took it.
    pub async fn keep(&self) -> String {
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            match self.try_hold().await {
                Ok(Attempt::Held) => last_renewal = tokio::time::Instant::now(),
                Ok(Attempt::HeldByOther(holder)) => return format!("lease taken by {holder}"),
                Err(f) if last_renewal.elapsed() >= self.config.lease_duration => {
                    return format!(
                        "lease not renewed for {:?}: {} failed: {}",
                        self.config.lease_duration, f.verb, f.error
                    );
                }
                Err(f) => {
                    tracing::warn!(verb = f.verb, error = %f.error, "lease renewal failed; retrying")
                }
            }
        }
    }

    /// Gives the Lease up (on shutdown), so a follower takes over at once.
    pub async fn release(&self) {
        if let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await {
            let ours = lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                == Some(self.config.identity.as_str());
            if ours {
                if let Some(spec) = lease.spec.as_mut() {
                    spec.holder_identity = None;
                    spec.renew_time = None;
                }
                let _ = self
                    .api
                    .replace(&self.config.name, &PostParams::default(), &lease)
                    .await;
            }
        }
    }

    async fn try_hold(&self) -> Result<Attempt, Failure> {
        let now = Timestamp::now();
        let found = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(Failure::on("get"))?;
        let Some(mut lease) = found else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec(now, now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Held),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    Ok(Attempt::HeldByOther("(racing)".into()))
                }
                Err(e) => Err(Failure::on("create")(e)),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let ours = holder == self.config.identity;
        if !ours && !holder.is_empty() && !self.expired(&spec, now) {
            return Ok(Attempt::HeldByOther(holder));
        }
        let acquired = match (ours, spec.acquire_time.clone()) {
            (true, Some(t)) => t.0,
            _ => now,
        };
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
        lease.spec = Some(self.spec(acquired, now, transitions));
        // The read resourceVersion travels with `lease`: a concurrent writer makes this 409.
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(Attempt::Held),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::HeldByOther(holder)),
            Err(e) => Err(Failure::on("update")(e)),
        }
    }

    fn expired(&self, spec: &LeaseSpec, now: Timestamp) -> bool {
        let duration = spec
            .lease_duration_seconds
            .map_or(self.config.lease_duration, |s| {
                Duration::from_secs(u64::try_from(s).unwrap_or(0))
            });
        match &spec.renew_time {
            None => true,
            Some(renewed) => {
                let elapsed = now.duration_since(renewed.0);
                elapsed.as_secs_f64() > duration.as_secs_f64()
            }
        }
    }

    fn spec(&self, acquired: Timestamp, renewed: Timestamp, transitions: i32) -> LeaseSpec {
        let seconds = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(seconds),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }
}
