//! Sprig v3's functions and Helm's own, as one [`FuncMap`].
//!
//! One module per Sprig area; each has a `register` adding its functions. Helm's set is Sprig's
//! without `env`/`expandenv`, with Helm's functions added over it (`toJson`/`fromJson` are
//! Helm's, not Sprig's, in a chart).

use crate::template::FuncMap;

pub mod crypto;
pub mod date;
pub mod defaults;
pub mod dicts;
pub mod encoding;
pub mod helm;
pub mod lists;
pub mod math;
pub mod network;
pub mod random;
pub mod reflect;
pub mod regex;
pub mod semver;
pub mod strings;

/// Every function a Helm chart may call: Sprig's set plus Helm's (`include`, `tpl`, `toYaml`, …).
pub fn helm() -> FuncMap {
    let mut map = FuncMap::new();
    register_sprig(&mut map);
    map.remove("env");
    map.remove("expandenv");
    helm::register(&mut map);
    map
}

/// Sprig v3's functions (`sprig.TxtFuncMap`).
pub fn register_sprig(map: &mut FuncMap) {
    strings::register(map);
    encoding::register(map);
    lists::register(map);
    dicts::register(map);
    math::register(map);
    reflect::register(map);
    defaults::register(map);
    crypto::register(map);
    date::register(map);
    semver::register(map);
    regex::register(map);
    network::register(map);
    random::register(map);
}
