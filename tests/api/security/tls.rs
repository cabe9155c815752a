//! Step endpoints over TLS (docs/security.md, "Step endpoints over TLS"):
//! an endpoint whose certificate a private CA issued is reached once that
//! CA is configured, and one that requires a client certificate once the
//! engine presents one. The CA and every certificate are made here.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;

use crate::helpers::{call, register, run_tartan, spawn_serve, sync_step, wait_for_terminal};
use tartan_testkit::{Backend, TestDb};

/// A CA, a server certificate for 127.0.0.1 and a client certificate it
/// issued, and one from another CA.
struct Pki {
    dir: PathBuf,
    ca: CertificateDer<'static>,
    server: CertificateDer<'static>,
    server_key: PrivateKeyDer<'static>,
}

impl Pki {
    fn new() -> Pki {
        let dir = std::env::temp_dir().join(format!("tartan-tls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "tartan test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);

        let server_key = KeyPair::generate().unwrap();
        let mut server = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = server.signed_by(&server_key, &issuer).unwrap();

        let client_key = KeyPair::generate().unwrap();
        let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
        client
            .distinguished_name
            .push(DnType::CommonName, "tartan engine");
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = client.signed_by(&client_key, &issuer).unwrap();

        std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
        std::fs::write(dir.join("client.pem"), client_cert.pem()).unwrap();
        std::fs::write(dir.join("client-key.pem"), client_key.serialize_pem()).unwrap();
        std::fs::write(dir.join("not-pem.pem"), "hello\n").unwrap();
        Pki {
            dir,
            ca: ca_cert.der().clone(),
            server: server_cert.der().clone(),
            server_key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
        }
    }

    fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A step answering `{"y": "secure"}` over TLS on 127.0.0.1, asking for a
/// client certificate of the CA when `mutual`; its URL, and how many
/// requests it answered.
async fn tls_step(pki: &Pki, mutual: bool) -> (String, Arc<AtomicUsize>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if mutual {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca.clone()).unwrap();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder
        .with_single_cert(vec![pki.server.clone()], pki.server_key.clone_key())
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().route(
        "/s",
        axum::routing::post(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async { axum::Json(json!({"y": "secure"})) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                // A refused handshake ends here: no request is served.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (format!("https://127.0.0.1:{port}/s"), hits)
}

/// An engine on a database of its own with `env`; runs one flow through the
/// step at `url` (no retry) and gives its final state.
async fn run_through(url: &str, env: &[(&str, &str)]) -> serde_json::Value {
    let db = TestDb::create(Backend::Sqlite).await.unwrap();
    let engine = spawn_serve(
        &[
            "--listen",
            "127.0.0.1:0",
            "--node-id",
            "tls",
            "--database-url",
            &db.url,
        ],
        env,
    )
    .await;
    let mut step = sync_step("secure", url, &["x"], &["y"]);
    step["work_config"] = json!({"max_attempts": 1});
    register(&engine, vec![step]).await;
    let start = json!({"id": "f", "goals": ["secure"], "init": {"x": ["1"]}});
    let (status, body) = call(&engine, reqwest::Method::POST, "/engine/flow", Some(start)).await;
    assert_eq!(status, 201, "{body}");
    wait_for_terminal(&engine, "f").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_cas_endpoint_is_reached_once_its_ca_is_trusted() {
    let pki = Pki::new();
    let (url, hits) = tls_step(&pki, false).await;
    // The public roots only: the certificate does not verify, no request.
    let flow = run_through(&url, &[]).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert!(flow.to_string().contains("certificate"), "{flow}");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    // With the CA.
    let ca = pki.file("ca.pem");
    let flow = run_through(&url, &[("TARTAN_STEP_CA_FILE", &ca)]).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_requiring_a_client_certificate_is_reached_with_one() {
    let pki = Pki::new();
    let (url, hits) = tls_step(&pki, true).await;
    let ca = pki.file("ca.pem");
    let flow = run_through(&url, &[("TARTAN_STEP_CA_FILE", &ca)]).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    let (cert, key) = (pki.file("client.pem"), pki.file("client-key.pem"));
    let flow = run_through(
        &url,
        &[
            ("TARTAN_STEP_CA_FILE", &ca),
            ("TARTAN_STEP_CLIENT_CERT_FILE", &cert),
            ("TARTAN_STEP_CLIENT_KEY_FILE", &key),
        ],
    )
    .await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn bad_tls_files_stop_the_start_naming_the_setting() {
    let pki = Pki::new();
    let check = |env: Vec<(&'static str, String)>| async move {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        run_tartan(&["config", "check"], &env).await
    };
    let (ok, _, err) = check(vec![("TARTAN_STEP_CA_FILE", pki.file("not-pem.pem"))]).await;
    assert!(!ok);
    assert!(
        err.starts_with("error: TARTAN_STEP_CA_FILE (environment variable): "),
        "{err}"
    );
    let (ok, _, err) = check(vec![("TARTAN_STEP_CA_FILE", pki.file("missing.pem"))]).await;
    assert!(!ok);
    assert!(
        err.contains("TARTAN_STEP_CA_FILE (environment variable): reading"),
        "{err}"
    );
    let (ok, _, err) = check(vec![("TARTAN_STEP_CLIENT_CERT_FILE", pki.file("client.pem"))]).await;
    assert!(!ok);
    assert!(err.contains("without step_client_key_file"), "{err}");
    // A key that is not the certificate's own kind of file.
    let (ok, _, err) = check(vec![
        ("TARTAN_STEP_CLIENT_CERT_FILE", pki.file("client.pem")),
        ("TARTAN_STEP_CLIENT_KEY_FILE", pki.file("not-pem.pem")),
    ])
    .await;
    assert!(!ok);
    assert!(err.contains("TARTAN_STEP_CLIENT_KEY_FILE"), "{err}");
}
