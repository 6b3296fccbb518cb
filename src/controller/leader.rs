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

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};

use super::Timestamp;

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

/// What one attempt at the Lease found.
enum Attempt {
    Held,
    HeldByOther(String),
}

impl Elector {
    pub fn new(client: kube::Client, config: LeaseConfig) -> Elector {
        Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
        }
    }

    /// Waits until this replica holds the Lease. API errors are logged and retried.
    pub async fn acquire(&self) {
        let mut logged_holder = None;
        loop {
            match self.try_hold().await {
                Ok(Attempt::Held) => {
                    tracing::info!(lease = %self.config.name, identity = %self.config.identity, "leading");
                    return;
                }
                Ok(Attempt::HeldByOther(holder)) => {
                    if logged_holder.as_ref() != Some(&holder) {
                        tracing::info!(lease = %self.config.name, %holder, "waiting: another replica leads");
                        logged_holder = Some(holder);
                    }
                }
                Err(e) => tracing::warn!(lease = %self.config.name, error = %e, "leader election"),
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
                Err(e) if last_renewal.elapsed() >= self.config.lease_duration => {
                    return format!(
                        "lease not renewed for {:?}: {e}",
                        self.config.lease_duration
                    );
                }
                Err(e) => tracing::warn!(error = %e, "lease renewal failed; retrying"),
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

    async fn try_hold(&self) -> Result<Attempt, kube::Error> {
        let now = Timestamp::now();
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
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
                Err(e) => Err(e),
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
            Err(e) => Err(e),
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
