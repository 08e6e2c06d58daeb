//! Template functions: network — Sprig's `getHostByName`.
//!
//! Sprig resolves the name with the system resolver and returns one of its addresses, picked at
//! random (here from the render's seedable source). A name that does not resolve makes Sprig
//! index an empty list, which Go reports as `invalid argument to Intn`.
//!
//! Helm replaces this function with one that always returns `""` unless DNS lookups are enabled
//! (`helm template --enable-dns`); that override belongs to Helm's own function set.

use std::net::ToSocketAddrs as _;

use rand::RngExt as _;

use super::crypto::{str_arg, want_args};
use crate::template::{Call, FuncMap};
use crate::value::Value;

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("getHostByName", get_host_by_name);
}

/// The addresses `name` resolves to, in the resolver's order, without repeats.
pub fn lookup_host(name: &str) -> Vec<String> {
    let Ok(addresses) = (name, 0).to_socket_addrs() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for address in addresses {
        let text = address.ip().to_string();
        if !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

fn get_host_by_name(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    let name = str_arg(&args[0])?;
    let addresses = lookup_host(name);
    if addresses.is_empty() {
        return Err("invalid argument to Intn".into());
    }
    let pick = call.env.rng.random_range(0..addresses.len());
    Ok(Value::str(&addresses[pick]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::funcs::crypto::test_call;

    #[test]
    fn resolves_literals_and_fails_as_sprig() {
        assert_eq!(
            test_call(get_host_by_name, &[Value::str("127.0.0.1")])
                .unwrap()
                .to_string(),
            "127.0.0.1"
        );
        assert_eq!(
            test_call(get_host_by_name, &[Value::str("::1")])
                .unwrap()
                .to_string(),
            "::1"
        );
        assert_eq!(
            test_call(get_host_by_name, &[Value::str("name.invalid")]).unwrap_err(),
            "invalid argument to Intn"
        );
    }
}
