//! End to end: mutual TLS between the kube-apiserver and `gangplank serve --client-ca`
//! (issue 32, item 2), with the apiserver's client certificate given as a self-managed
//! control plane gives it: an AdmissionConfiguration (`--admission-control-config-file`)
//! whose ValidatingAdmissionWebhook and MutatingAdmissionWebhook plugins name a
//! `kubeConfigFile` holding the certificate for the webhook's address.
//!
//! Three servers with `--client-ca` behind one apiserver, each for a namespace of its own: the
//! kubeconfig gives a certificate for the first and third ones' addresses only. A job in the
//! first namespace is judged (mutated and stored) by a server that also pins the
//! certificate's subject (`--client-ca-subject`, issue 41 item 3); in the second, the
//! apiserver presents no certificate, gangplank refuses it, and with `failurePolicy: Fail` the
//! job is refused ("failed calling webhook"): an unauthenticated caller is not judged. The
//! third requires another subject than the apiserver's certificate carries, and refuses it
//! alike: a certificate of the right CA for the wrong name is not the apiserver.
//!
//! Needs the test binaries (`tests/support/assets.rs`; without them the suite prints why it
//! skipped).

mod support;

use std::path::Path;

use gangplank::admission::certs::Ca;
use support::control_plane::free_ports;
use support::{jobs, ControlPlane, Crds, Scheduling, Webhooks};

e2e_suite!(
    "e2e_mtls",
    [a_job_is_judged_when_the_apiserver_presents_its_certificate_and_refused_when_it_presents_none_or_another_subject]
);

/// The AdmissionConfiguration of a self-managed control plane: both webhook plugins read the
/// client certificates of `kubeconfig`.
fn admission_configuration(kubeconfig: &Path) -> String {
    let plugin = |name: &str| {
        format!(
            "  - name: {name}
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: {}
",
            kubeconfig.display()
        )
    };
    format!(
        "apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
{}{}",
        plugin("ValidatingAdmissionWebhook"),
        plugin("MutatingAdmissionWebhook")
    )
}

/// The kubeconfig of the webhook plugins: a user per webhook address (`host:port` for a URL
/// webhook; `<service>.<namespace>.svc` for a Service), each holding the client certificate
/// and key the apiserver presents there.
fn webhook_kubeconfig(addresses: &[String], cert: &Path, key: &Path) -> String {
    let users: String = addresses
        .iter()
        .map(|address| {
            format!(
                "  - name: '{address}'
    user:
      client-certificate: {}
      client-key: {}
",
                cert.display(),
                key.display()
            )
        })
        .collect();
    format!("apiVersion: v1\nkind: Config\nusers:\n{users}")
}

async fn a_job_is_judged_when_the_apiserver_presents_its_certificate_and_refused_when_it_presents_none_or_another_subject(
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |name: &str| dir.path().join(name);
    let client_ca = Ca::generate(1).expect("client CA");
    let apiserver = client_ca
        .issue_client("kube-apiserver-webhook-client", 1)
        .expect("client certificate");
    std::fs::write(file("client-ca.crt"), client_ca.pem()).expect("write");
    std::fs::write(file("apiserver.crt"), &apiserver.cert_pem).expect("write");
    std::fs::write(file("apiserver.key"), &apiserver.key_pem).expect("write");
    let [with_cert, without_cert, other_subject] = free_ports();
    std::fs::write(
        file("webhook-kubeconfig.yaml"),
        webhook_kubeconfig(
            &[
                format!("127.0.0.1:{with_cert}"),
                format!("127.0.0.1:{other_subject}"),
            ],
            &file("apiserver.crt"),
            &file("apiserver.key"),
        ),
    )
    .expect("write");
    std::fs::write(
        file("admission.yaml"),
        admission_configuration(&file("webhook-kubeconfig.yaml")),
    )
    .expect("write");
    let control_plane = ControlPlane::start_with_apiserver_flags(
        &support::assets::get(),
        Crds::TrainingV1,
        Scheduling::None,
        vec![format!(
            "--admission-control-config-file={}",
            file("admission.yaml").display()
        )],
    );
    let client = control_plane.client().await;
    let flags = [format!("--client-ca={}", file("client-ca.crt").display())];
    let pinned = |subject: &str| [flags[0].clone(), format!("--client-ca-subject={subject}")];
    let policies = support::repo().join("policies");

    let trusted = control_plane.namespace("mtls").await;
    let webhooks = Webhooks::start_scoped(
        &control_plane,
        policies.clone(),
        Some(&trusted),
        with_cert,
        &pinned("kube-apiserver-webhook-client"),
    )
    .await;
    // The apiserver reaches it with its certificate: both webhooks answer a dry run.
    webhooks.wait_active(&client, &trusted).await;
    jobs::create(&client, &trusted, &jobs::pytorch_job("bert", 1), false)
        .await
        .expect("judged and stored");
    let stored = jobs::stored_pytorch_job(&client, &trusted, "bert").await;
    assert_eq!(
        stored["spec"]["runPolicy"]["backoffLimit"], 3,
        "mutated by gangplank: {stored}"
    );
    let decided = webhooks.decisions_in(&trusted);
    assert!(
        decided.iter().any(|d| d["span"]["object_name"] == "bert"),
        "gangplank judged the job: {decided:?}"
    );

    let untrusted = control_plane.namespace("mtls-no-cert").await;
    let refusing = Webhooks::start_scoped(
        &control_plane,
        policies.clone(),
        Some(&untrusted),
        without_cert,
        &flags,
    )
    .await;
    // "Internal error occurred: failed calling webhook "mutate.gangplank.dev": failed to
    // call webhook: /mutate requires a client certificate signed by gangplank's --client-ca
    // (GANGPLANK_CLIENT_CA); this connection presented none"
    let message = refused_by(&client, &refusing, &untrusted).await;
    assert!(
        message.contains("requires a client certificate signed by gangplank's --client-ca"),
        "refused because gangplank refused the unauthenticated call: {message}"
    );

    let elsewhere = control_plane.namespace("mtls-other-subject").await;
    let pinned_elsewhere = Webhooks::start_scoped(
        &control_plane,
        policies,
        Some(&elsewhere),
        other_subject,
        &pinned("kube-apiserver"),
    )
    .await;
    let message = refused_by(&client, &pinned_elsewhere, &elsewhere).await;
    assert!(
        message.contains("carries the identity --client-ca-subject / --client-san name")
            && message.contains("CN kube-apiserver-webhook-client"),
        "refused because the certificate carries another subject: {message}"
    );
}

/// Waits until `server`'s configuration reaches the apiserver, and returns the message a job
/// created in `namespace` is refused with; asserts gangplank judged nothing there.
async fn refused_by(client: &kube::Client, server: &Webhooks, namespace: &str) -> String {
    // Listening: a failed call below is gangplank's refusal, not a connection refused.
    server.wait_ready().await;
    // The configuration reaches the apiserver's informer in a moment: until then the job is
    // created unjudged (and deleted again); from then on it is refused.
    let message = support::wait_for(
        "the apiserver calls the server",
        std::time::Duration::from_secs(60),
        || async {
            match jobs::create(client, namespace, &jobs::pytorch_job("bert", 1), false).await {
                Err(kube::Error::Api(status)) => Ok(status.message),
                Err(other) => Err(other.to_string()),
                Ok(_) => {
                    jobs::pytorch_api(client, namespace)
                        .delete("bert", &Default::default())
                        .await
                        .map_err(|e| e.to_string())?;
                    Err("created before the configuration was active".to_string())
                }
            }
        },
    )
    .await;
    assert!(message.contains("failed calling webhook"), "{message}");
    assert!(
        server.decisions_in(namespace).is_empty(),
        "gangplank judged nothing for a caller it did not authenticate"
    );
    message
}
