//! The TLS side of an HTTPS check: one client configuration for every probe (rustls with the
//! ring provider, TLS 1.2 and 1.3), and the server name a probe presents. A health check only
//! reads a status line, so the server's certificate chain and name are not verified (as
//! HAProxy's `check-ssl verify none`); the handshake's signatures still are, by the provider.
//! It never opens a socket and never reads a file.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use tokio_rustls::TlsConnector;

/// Accepts any certificate; checks the handshake signatures with the provider's algorithms.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The connector every HTTPS probe uses (made once); None if rustls refused the
/// configuration (it does not with the ring provider's defaults).
pub fn connector() -> Option<TlsConnector> {
    static CONNECTOR: OnceLock<Option<TlsConnector>> = OnceLock::new();
    CONNECTOR
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .ok()?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth();
            Some(TlsConnector::from(Arc::new(config)))
        })
        .clone()
}

/// The name an HTTPS probe presents: the `Host` header's name without its port (SNI), or the
/// address itself (no SNI is sent for an address).
pub fn server_name(host: &str, target: SocketAddr) -> ServerName<'static> {
    let name = host_name(host);
    match name.parse::<IpAddr>() {
        Ok(ip) => ServerName::IpAddress(ip.into()),
        Err(_) => ServerName::try_from(name.to_string())
            .unwrap_or(ServerName::IpAddress(target.ip().into())),
    }
}

/// `host` without a `:port` and without IPv6 brackets.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        // One colon: name:port; more: a bare IPv6 address.
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_the_hosts_without_port_or_the_address() {
        let t: SocketAddr = "198.18.12.11:443".parse().unwrap();
        let dns = |n: &str| ServerName::try_from(n.to_string()).unwrap();
        let ip = |a: &str| ServerName::IpAddress(a.parse::<IpAddr>().unwrap().into());
        assert_eq!(server_name("www.example", t), dns("www.example"));
        assert_eq!(server_name("www.example:8443", t), dns("www.example"));
        assert_eq!(server_name("198.18.1.1:443", t), ip("198.18.1.1"));
        assert_eq!(server_name("[2001:db8::1]:443", t), ip("2001:db8::1"));
        assert_eq!(server_name("2001:db8::1", t), ip("2001:db8::1"));
        // Not a valid name: the target's address.
        assert_eq!(server_name("bad name!", t), ip("198.18.12.11"));
        assert!(connector().is_some());
    }
}
