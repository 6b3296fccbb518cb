//! An MPIJob's shared objects: its ConfigMap, v2beta1's SSH Secret, v1's launcher RBAC.

use super::*;

impl Planner<'_> {
    /// An MPIJob's shared objects, before its pods, which mount or use them: the ConfigMap
    /// (kept in step with the running workers), then v2beta1's SSH Secret and Service or v1's
    /// launcher ServiceAccount, Role and RoleBinding.
    pub(super) fn mpi_shared_objects(&mut self, slots: &[Slots]) {
        let (job, observed) = (self.job, self.observed);
        let want = match mpi::is_v2(job) {
            true => mpi::objects::config_map(job, &workers(slots), self.config),
            false => mpi::kubexec::config_map(job, &workers(slots)),
        };
        match &observed.config_map {
            None => self.push(Action::CreateConfigMap(Box::new(want))),
            Some(have) if have.data != want.data => self.push(Action::UpdateConfigMap {
                name: mpi::config_name(job),
                data: want.data.unwrap_or_default(),
            }),
            Some(_) => {}
        }
        match mpi::is_v2(job) {
            true => self.ssh_objects(),
            false => self.launcher_rbac(&workers(slots)),
        }
    }

    /// v2beta1: the SSH Secret (never rewritten once it exists) and the headless Service.
    pub(super) fn ssh_objects(&mut self) {
        let (job, observed) = (self.job, self.observed);
        match observed.ssh_secret {
            SshSecret::Absent => {
                let secret = mpi::objects::ssh_secret(job);
                self.push(Action::CreateSshSecret(Box::new(secret)));
            }
            SshSecret::Damaged => {
                let msg = format!(
                    "Secret {:?} lost its keys; writing a new pair",
                    mpi::secret_name(job)
                );
                self.out
                    .events
                    .push(Event::warning("SSHSecretRepaired", msg));
                self.push(Action::RepairSshSecret {
                    name: mpi::secret_name(job),
                });
            }
            SshSecret::Intact => {}
        }
        if !observed.has_service(&job.name) {
            let service = mpi::objects::service(job);
            self.push(Action::CreateService(Box::new(service)));
        }
    }

    /// v1: the launcher's ServiceAccount, its Role (exec rights on exactly the job's own
    /// `workers` observed, so rewritten as they appear and go) and the RoleBinding between
    /// them.
    pub(super) fn launcher_rbac(&mut self, workers: &[&Pod]) {
        let (job, have) = (self.job, &self.observed.launcher_rbac);
        if !have.service_account {
            let account = mpi::kubexec::service_account(job);
            self.push(Action::CreateServiceAccount(Box::new(account)));
        }
        let rules = mpi::kubexec::role_rules(workers);
        match &have.role {
            None => {
                let role = mpi::kubexec::role(job, workers);
                self.push(Action::CreateRole(Box::new(role)));
            }
            Some(role) if role.rules.as_ref() != Some(&rules) => self.push(Action::UpdateRole {
                name: mpi::launcher_name(job),
                rules,
            }),
            Some(_) => {}
        }
        if !have.role_binding {
            let binding = mpi::kubexec::role_binding(job);
            self.push(Action::CreateRoleBinding(Box::new(binding)));
        }
    }
}
