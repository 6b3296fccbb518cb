//! Which namespaces the controller serves: every one (cluster-wide watches, as upstream), or
//! only those `gangplank controller --namespaces` lists, each watched on its own, so that
//! RoleBindings in just those namespaces are all the rights it needs
//! (deploy/controller-namespaced).
//!
//! Entry point: [`Scope::from_flag`]; [`Scope::each`] gives what every watch is opened on,
//! [`api`] and [`dynamic_api`] the API handle for one of those.

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, ApiResource, DynamicObject};

/// Where the controller watches and acts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace: one watch per resource, across the cluster.
    #[default]
    Cluster,
    /// These namespaces only (sorted, without repeats): one watch per resource and namespace.
    /// A job anywhere else is never seen, so never reconciled.
    Namespaces(Vec<String>),
}

impl Scope {
    /// The scope `--namespaces` names: none (or only empty entries) is the whole cluster. A
    /// name that cannot be a namespace is an error naming it.
    pub fn from_flag(names: &[String]) -> Result<Scope, String> {
        let mut listed: Vec<String> = names
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        if let Some(bad) = listed.iter().find(|n| !is_namespace_name(n)) {
            return Err(format!(
                "--namespaces: {bad:?} is not a namespace name (lower-case letters, digits and \
                 '-', at most 63, starting and ending with a letter or digit); list namespaces \
                 separated by commas (GANGPLANK_NAMESPACES), or none for the whole cluster"
            ));
        }
        listed.sort();
        listed.dedup();
        Ok(match listed.is_empty() {
            true => Scope::Cluster,
            false => Scope::Namespaces(listed),
        })
    }

    /// What each watch is opened on: `None` (the cluster) once, or each namespace.
    pub fn each(&self) -> Vec<Option<&str>> {
        match self {
            Scope::Cluster => vec![None],
            Scope::Namespaces(names) => names.iter().map(|n| Some(n.as_str())).collect(),
        }
    }
}

/// A DNS-1123 label, what a namespace name is.
fn is_namespace_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    name.len() <= 63
        && edge(bytes.first())
        && edge(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// The handle for `K` in `namespace`, or across the cluster for `None`.
pub fn api<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// As [`api`], for a resource known at run time (the jobs, PodGroups, TrainJobs).
pub fn dynamic_api(
    client: &kube::Client,
    namespace: Option<&str>,
    resource: &ApiResource,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn no_namespaces_listed_is_the_whole_cluster() {
        assert_eq!(Scope::from_flag(&[]), Ok(Scope::Cluster));
        // GANGPLANK_NAMESPACES="" reaches the flag as one empty entry.
        assert_eq!(Scope::from_flag(&names(&[""])), Ok(Scope::Cluster));
        assert_eq!(Scope::Cluster.each(), vec![None]);
    }

    #[test]
    fn listed_namespaces_are_trimmed_sorted_and_each_watched_once() {
        let scope = Scope::from_flag(&names(&["team-b", " team-a", "team-b", ""]));
        assert_eq!(scope, Ok(Scope::Namespaces(names(&["team-a", "team-b"]))));
        let scope = scope.unwrap_or_default();
        assert_eq!(scope.each(), vec![Some("team-a"), Some("team-b")]);
    }

    #[test]
    fn a_name_that_cannot_be_a_namespace_is_refused_naming_it() {
        for bad in ["Team-A", "team_a", "-team", "team-", &"a".repeat(64)] {
            let err = Scope::from_flag(&names(&[bad])).err().unwrap_or_default();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
            assert!(err.contains("--namespaces"), "{err}");
        }
    }
}
