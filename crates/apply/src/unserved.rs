//! A hint for a Flux kind written at an API version Capstan does not serve (an older one, e.g.
//! `source.toolkit.fluxcd.io/v1beta2` OCIRepository): `capstan migrate` moves it.

/// `; run `capstan migrate -f <path>` to move it to <group>/<served version>` when `kind` of
/// `group` is served at another version than `version`; `None` for any other kind.
pub(crate) fn migrate_hint(group: &str, version: &str, kind: &str) -> Option<String> {
    let served = capstan_api::KINDS
        .iter()
        .find(|info| info.group == group && info.kind == kind)?;
    (served.version != version).then(|| {
        format!(
            "; run `capstan migrate -f <path>` to move it to {}",
            served.api_version
        )
    })
}

#[cfg(test)]
mod tests {
    use super::migrate_hint;

    #[test]
    fn older_versions_of_served_kinds_name_the_served_version() {
        assert_eq!(
            migrate_hint("source.toolkit.fluxcd.io", "v1beta2", "OCIRepository").as_deref(),
            Some("; run `capstan migrate -f <path>` to move it to source.toolkit.fluxcd.io/v1")
        );
        assert_eq!(
            migrate_hint("helm.toolkit.fluxcd.io", "v2beta1", "HelmRelease").as_deref(),
            Some("; run `capstan migrate -f <path>` to move it to helm.toolkit.fluxcd.io/v2")
        );
        assert_eq!(
            migrate_hint("source.toolkit.fluxcd.io", "v1", "GitRepository"),
            None
        );
        assert_eq!(migrate_hint("example.com", "v1beta1", "Widget"), None);
        assert_eq!(
            migrate_hint("source.toolkit.fluxcd.io", "v1beta2", "Widget"),
            None
        );
    }
}
