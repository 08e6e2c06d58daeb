//! The TLS crypto provider.

/// Installs rustls' `ring` provider as the process default when none is installed yet.
///
/// The workspace builds rustls with `ring` only (no aws-lc-rs); reqwest and oci-client are
/// built without a provider of their own and use the process default.
pub fn install_default_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another thread installing a provider is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
