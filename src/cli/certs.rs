//! `gangplank certs`: a CA and a serving certificate for the webhook Service, and the
//! caBundle for the webhook configurations.

use std::path::PathBuf;

use clap::Args;

use super::report::error_chain;
use crate::admission::certs::Bundle;
use crate::exit;

#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Directory to write ca.crt, tls.crt and tls.key (mode 0600) into; the key names of a
    /// kubernetes.io/tls Secret.
    #[arg(long, env = "GANGPLANK_CERTS_OUT")]
    pub out: PathBuf,
    /// DNS names (or IP addresses) the apiserver reaches the webhook by, e.g.
    /// gangplank-webhook.gangplank.svc. Repeat or separate with commas.
    #[arg(
        long = "dns",
        required = true,
        value_delimiter = ',',
        env = "GANGPLANK_CERTS_DNS"
    )]
    pub dns: Vec<String>,
    /// Validity of the CA and the certificate, in days.
    #[arg(long, default_value_t = 365, env = "GANGPLANK_CERTS_DAYS")]
    pub days: u32,
    /// Replace files that already exist in --out.
    #[arg(long, env = "GANGPLANK_CERTS_FORCE")]
    pub force: bool,
}

impl CertsArgs {
    /// Writes the files, then prints the caBundle (base64 of ca.crt) alone on stdout.
    pub fn run(self) -> u8 {
        let Self {
            out,
            dns,
            days,
            force,
        } = self;
        let existing: Vec<_> = ["ca.crt", "tls.crt", "tls.key"]
            .iter()
            .map(|f| out.join(f))
            .filter(|p| p.exists())
            .collect();
        if !force && !existing.is_empty() {
            let names: Vec<_> = existing.iter().map(|p| p.display().to_string()).collect();
            eprintln!(
                "error: {} already exist(s); pass --force to replace",
                names.join(", ")
            );
            return exit::UNREADABLE;
        }
        let bundle = match Bundle::generate(&dns, days) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error: {}", error_chain(&e));
                return exit::UNREADABLE;
            }
        };
        if let Err(e) = bundle.write_to(&out) {
            eprintln!("error: {}", error_chain(&e));
            return exit::UNREADABLE;
        }
        eprintln!(
            "wrote {dir}/ca.crt, {dir}/tls.crt and {dir}/tls.key for {names}, valid {days} days; caBundle for the webhook configurations:",
            dir = out.display(),
            names = dns.join(", "),
        );
        println!("{}", bundle.ca_bundle());
        exit::OK
    }
}
