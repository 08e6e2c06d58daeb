//! Multi-tenancy lockdown, as Flux's controller flags: `--no-cross-namespace-refs` refuses a
//! source reference into another namespace (`Ready=False`, reason `AccessDenied`, stalled
//! until the spec changes), and `--default-service-account` impersonates that ServiceAccount
//! of the object's namespace when `spec.serviceAccountName` is empty.

/// The reason of a reference refused by `--no-cross-namespace-refs` (Flux's).
pub const ACCESS_DENIED: &str = "AccessDenied";

/// The lockdown settings a Kustomization or HelmRelease reconciler applies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tenancy {
    /// Refuse source references into another namespace (`--no-cross-namespace-refs`).
    pub no_cross_namespace_refs: bool,
    /// The ServiceAccount impersonated when `spec.serviceAccountName` is empty
    /// (`--default-service-account`); `None` applies with the controller's own identity.
    pub default_service_account: Option<String>,
    /// The one namespace the controller watches (`--watch-all-namespaces=false`), if not all.
    pub watch_namespace: Option<String>,
}

impl Tenancy {
    /// The ServiceAccount an object with `spec.serviceAccountName` = `named` applies as: its own
    /// when set and not empty, else the default one, if any.
    #[must_use]
    pub fn service_account(&self, named: Option<&str>) -> Option<String> {
        service_account(named, self.default_service_account.as_deref()).map(str::to_owned)
    }

    /// Whether a reference from `own` namespace to `target` namespace is refused.
    #[must_use]
    pub fn refuses(&self, own: &str, target: &str) -> bool {
        self.no_cross_namespace_refs && own != target
    }

    /// Why a source in `target` namespace may never become ready for this controller: it
    /// watches one namespace and `target` is another, so nothing here reconciles that source.
    #[must_use]
    pub fn unwatched(&self, target: &str) -> Option<String> {
        let watched = self.watch_namespace.as_deref()?;
        (watched != target).then(|| {
            format!(
                "namespace '{target}' is not watched: this controller watches only '{watched}' \
                 (--watch-all-namespaces=false)"
            )
        })
    }
}

/// `named` when set and not empty, else `default` when set and not empty.
#[must_use]
pub fn service_account<'a>(named: Option<&'a str>, default: Option<&'a str>) -> Option<&'a str> {
    named
        .filter(|name| !name.is_empty())
        .or(default)
        .filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use super::Tenancy;

    #[test]
    fn the_default_account_fills_an_empty_service_account_name() {
        let tenancy = Tenancy {
            no_cross_namespace_refs: true,
            default_service_account: Some("tenant".to_owned()),
            watch_namespace: None,
        };
        assert_eq!(tenancy.service_account(None).as_deref(), Some("tenant"));
        assert_eq!(tenancy.service_account(Some("")).as_deref(), Some("tenant"));
        assert_eq!(tenancy.service_account(Some("own")).as_deref(), Some("own"));
        assert_eq!(Tenancy::default().service_account(None), None);
        assert!(tenancy.refuses("a", "b"));
        assert!(!tenancy.refuses("a", "a"));
        assert!(!Tenancy::default().refuses("a", "b"));
        let one = Tenancy {
            watch_namespace: Some("flux-system".to_owned()),
            ..Tenancy::default()
        };
        assert_eq!(one.unwatched("flux-system"), None);
        assert!(
            one.unwatched("apps")
                .unwrap()
                .contains("'apps' is not watched")
        );
        assert_eq!(Tenancy::default().unwatched("apps"), None);
    }
}
