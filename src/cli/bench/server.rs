//! The server under load: `gangplank serve` started as a child with a fresh certificate, TLS
//! connections to it, and one review sent and checked against its expected answer.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{Case, Target};
use crate::admission::certs::Bundle;
use crate::admission::tls::provider;

/// A TLS client trusting `ca_pem`, speaking `alpn`.
pub(super) fn connector(ca_pem: &[u8], alpn: &[u8]) -> Result<TlsConnector, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| format!("CA: {e}"))?;
        roots.add(cert).map_err(|e| format!("CA: {e}"))?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// Starts `gangplank serve` on a free port with a fresh certificate.
pub(super) fn spawn_server(
    policies: &Path,
    extra: &[String],
) -> Result<(Target, ServerChild), String> {
    let dir = std::env::temp_dir().join(format!("gangplank-bench-{}", std::process::id()));
    let bundle = Bundle::generate(&["127.0.0.1".to_string()], 1).map_err(|e| e.to_string())?;
    bundle.write_to(&dir).map_err(|e| e.to_string())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("cannot find a free port: {e}"))?
        .port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let child = Command::new(exe)
        .arg("serve")
        .arg("--addr")
        .arg(addr.to_string())
        .arg("--tls-cert")
        .arg(dir.join("tls.crt"))
        .arg("--tls-key")
        .arg(dir.join("tls.key"))
        .arg("--policies")
        .arg(policies)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start gangplank serve: {e}"))?;
    let pid = child.id();
    eprintln!("# spawned gangplank serve (pid {pid}) on {addr}");
    let target = Target {
        addr,
        connector: connector(bundle.ca_pem.as_bytes(), b"http/1.1")?,
        h2_connector: connector(bundle.ca_pem.as_bytes(), b"h2")?,
        pid: Some(pid),
    };
    Ok((target, ServerChild { child, dir }))
}

/// Kills the spawned server and removes its certificates when the bench ends.
pub(super) struct ServerChild {
    child: Child,
    dir: PathBuf,
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(super) type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// How a failed TCP connect's error starts.
pub(super) const REFUSED: &str = "connect:";

pub(super) async fn connect(target: &Target) -> Result<Sender, String> {
    let tcp = TcpStream::connect(target.addr)
        .await
        .map_err(|e| format!("{REFUSED} {e}"))?;
    let _ = tcp.set_nodelay(true);
    let name = ServerName::IpAddress(target.addr.ip().into());
    let tls = target
        .connector
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

pub(super) async fn wait_ready(target: &Target) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(mut sender) = connect(target).await {
            let req = Request::get("/readyz")
                .header(hyper::header::HOST, target.addr.to_string())
                .body(Full::new(Bytes::new()));
            if let Ok(req) = req {
                if let Ok(r) = sender.send_request(req).await {
                    if r.status() == 200 {
                        return Ok(());
                    }
                }
            }
        }
        if Instant::now() > deadline {
            return Err(format!("server at {} not ready within 60 s", target.addr));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(super) async fn send(sender: &mut Sender, host: &str, case: &Case) -> Result<(), String> {
    sender.ready().await.map_err(|e| e.to_string())?;
    let req = Request::post(case.path)
        .header(hyper::header::HOST, host)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(case.body.clone()))
        .map_err(|e| e.to_string())?;
    let response = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let expected: &[u8] = if case.allowed {
        b"\"allowed\":true"
    } else {
        b"\"allowed\":false"
    };
    if status != 200 || !body.windows(expected.len()).any(|w| w == expected) {
        return Err(format!(
            "{} answered HTTP {status}, expected {}: {}",
            case.path,
            String::from_utf8_lossy(expected),
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ));
    }
    Ok(())
}
