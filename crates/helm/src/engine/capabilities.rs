//! `.Capabilities`: the cluster and Helm versions a render assumes, as Helm v4.2.3's
//! `common.Capabilities` shows them to templates (fields, `%v` forms, `toYaml`/`toJson` forms).

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::value::{Object, Value};

/// The API versions Helm v4.2.3 assumes without a cluster (group/versions only, in its order).
pub const DEFAULT_API_VERSIONS: &[&str] = &[
    "v1",
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1alpha1",
    "admissionregistration.k8s.io/v1beta1",
    "internal.apiserver.k8s.io/v1alpha1",
    "apps/v1",
    "apps/v1beta1",
    "apps/v1beta2",
    "authentication.k8s.io/v1",
    "authentication.k8s.io/v1alpha1",
    "authentication.k8s.io/v1beta1",
    "authorization.k8s.io/v1",
    "authorization.k8s.io/v1beta1",
    "autoscaling/v1",
    "autoscaling/v2",
    "batch/v1",
    "batch/v1beta1",
    "certificates.k8s.io/v1",
    "certificates.k8s.io/v1beta1",
    "certificates.k8s.io/v1alpha1",
    "coordination.k8s.io/v1alpha2",
    "coordination.k8s.io/v1beta1",
    "coordination.k8s.io/v1",
    "discovery.k8s.io/v1",
    "discovery.k8s.io/v1beta1",
    "events.k8s.io/v1",
    "events.k8s.io/v1beta1",
    "extensions/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1",
    "flowcontrol.apiserver.k8s.io/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1beta2",
    "flowcontrol.apiserver.k8s.io/v1beta3",
    "networking.k8s.io/v1",
    "networking.k8s.io/v1beta1",
    "node.k8s.io/v1",
    "node.k8s.io/v1alpha1",
    "node.k8s.io/v1beta1",
    "policy/v1",
    "policy/v1beta1",
    "rbac.authorization.k8s.io/v1",
    "rbac.authorization.k8s.io/v1beta1",
    "rbac.authorization.k8s.io/v1alpha1",
    "resource.k8s.io/v1",
    "resource.k8s.io/v1beta2",
    "resource.k8s.io/v1beta1",
    "resource.k8s.io/v1alpha3",
    "scheduling.k8s.io/v1alpha2",
    "scheduling.k8s.io/v1beta1",
    "scheduling.k8s.io/v1",
    "storage.k8s.io/v1beta1",
    "storage.k8s.io/v1",
    "storage.k8s.io/v1alpha1",
    "storagemigration.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1",
];

/// The Kubernetes version Helm v4.2.3 assumes without `--kube-version`.
pub const DEFAULT_KUBE_VERSION: &str = "v1.36.0";

/// Helm's `common.KubeVersion`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeVersion {
    /// `Version` (also `GitVersion`): as given, with a `v` added.
    pub version: String,
    /// The parsed numbers only (`v1.29.0` for `v1.29.0-gke.1`): what `String` returns.
    pub normalized: String,
    /// `Major`.
    pub major: String,
    /// `Minor`.
    pub minor: String,
}

impl KubeVersion {
    /// Parses a `--kube-version` value the way Helm does (Kubernetes' generic version
    /// parser: at least `major.minor`, anything after the numbers ignored), with its error
    /// texts (`could not parse "abc" as version`, `illegal version string "1"`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let trimmed = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0c', '\x0b']);
        let body = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let numbers = numeric_prefix(body);
        if numbers.is_empty() {
            return Err(format!("could not parse {text:?} as version"));
        }
        let parts: Vec<&str> = numbers.split('.').collect();
        if parts.len() < 2 {
            return Err(format!("illegal version string {text:?}"));
        }
        let mut components = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            if i == 0 && part.starts_with('0') && *part != "0" {
                return Err(format!(
                    "illegal zero-prefixed version component {part:?} in {text:?}"
                ));
            }
            let number: u64 = part.parse().map_err(|_| {
                format!(
                    "illegal non-numeric version component {part:?} in {text:?}: \
                     strconv.ParseUint: parsing {part:?}: value out of range"
                )
            })?;
            components.push(number);
        }
        let version = if text.starts_with('v') {
            text.to_string()
        } else {
            format!("v{text}")
        };
        let joined: Vec<String> = components.iter().map(u64::to_string).collect();
        Ok(KubeVersion {
            version,
            normalized: format!("v{}", joined.join(".")),
            major: components[0].to_string(),
            minor: components[1].to_string(),
        })
    }

    /// Helm's default (v1.36.0).
    pub fn default_version() -> Self {
        KubeVersion {
            version: DEFAULT_KUBE_VERSION.into(),
            normalized: DEFAULT_KUBE_VERSION.into(),
            major: "1".into(),
            minor: "36".into(),
        }
    }
}

/// The leading `digits(.digits)*` of `s`.
fn numeric_prefix(s: &str) -> &str {
    let bytes = s.as_bytes();
    let mut end = 0;
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            break;
        }
        end = i;
        if i < bytes.len() && bytes[i] == b'.' {
            i += 1;
        } else {
            break;
        }
    }
    &s[..end]
}

impl Object for KubeVersion {
    fn type_name(&self) -> String {
        "common.KubeVersion".into()
    }

    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Version" => Some(Value::str(&self.version)),
            "Major" => Some(Value::str(&self.major)),
            "Minor" => Some(Value::str(&self.minor)),
            _ => None,
        }
    }

    fn method(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        let value = match name {
            "String" => &self.normalized,
            "GitVersion" => &self.version,
            _ => return None,
        };
        if !args.is_empty() {
            return Some(Err(format!(
                "wrong number of args for {name}: want 0 got {}",
                args.len()
            )));
        }
        Some(Ok(Value::str(value)))
    }

    fn format(&self) -> String {
        format!(
            "{{{} {} {} {}}}",
            self.version, self.normalized, self.major, self.minor
        )
    }

    fn to_data(&self) -> Value {
        Value::map(BTreeMap::from([
            ("Version".to_string(), Value::str(&self.version)),
            ("Major".to_string(), Value::str(&self.major)),
            ("Minor".to_string(), Value::str(&self.minor)),
        ]))
    }
}

/// Helm's `common.VersionSet`: the API versions, with `Has`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSet(pub Vec<String>);

impl Object for VersionSet {
    fn type_name(&self) -> String {
        "common.VersionSet".into()
    }

    fn kind_name(&self) -> &'static str {
        "slice"
    }

    fn field(&self, _: &str) -> Option<Value> {
        None
    }

    fn method(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        if name != "Has" {
            return None;
        }
        Some(match args {
            [Value::String(wanted)] => Ok(Value::Bool(self.0.iter().any(|v| **v == **wanted))),
            [other] => Err(format!("expected string; found {other}")),
            _ => Err(format!(
                "wrong number of args for Has: want 1 got {}",
                args.len()
            )),
        })
    }

    fn format(&self) -> String {
        format!("[{}]", self.0.join(" "))
    }

    fn to_data(&self) -> Value {
        Value::string_list(&self.0)
    }
}

/// Helm's `version.BuildInfo` as the SDK build reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelmVersion;

impl HelmVersion {
    const VERSION: &'static str = "v4.2";
    const GO_VERSION: &'static str = "go1.26.6";
    const KUBE_CLIENT_VERSION: &'static str = "v1.36";
}

impl Object for HelmVersion {
    fn type_name(&self) -> String {
        "version.BuildInfo".into()
    }

    fn field(&self, name: &str) -> Option<Value> {
        let value = match name {
            "Version" => Self::VERSION,
            "GitCommit" | "GitTreeState" => "",
            "GoVersion" => Self::GO_VERSION,
            "KubeClientVersion" => Self::KUBE_CLIENT_VERSION,
            _ => return None,
        };
        Some(Value::str(value))
    }

    fn format(&self) -> String {
        format!(
            "{{{}   {} {}}}",
            Self::VERSION,
            Self::GO_VERSION,
            Self::KUBE_CLIENT_VERSION
        )
    }

    fn to_data(&self) -> Value {
        // The JSON tags (`git_commit`/`git_tree_state` are omitted when empty).
        Value::map(BTreeMap::from([
            ("version".to_string(), Value::str(Self::VERSION)),
            ("go_version".to_string(), Value::str(Self::GO_VERSION)),
            (
                "kube_client_version".to_string(),
                Value::str(Self::KUBE_CLIENT_VERSION),
            ),
        ]))
    }
}

/// Helm's `*common.Capabilities`.
#[derive(Debug, Clone)]
pub struct Capabilities {
    kube_version: Rc<KubeVersion>,
    api_versions: Rc<VersionSet>,
}

impl Capabilities {
    /// Capabilities for `kube_version` (Helm's default when `None` or empty) with `extra` API
    /// versions appended to Helm's default list.
    pub fn new(kube_version: Option<&str>, extra: &[String]) -> Result<Self, String> {
        let kube_version = match kube_version {
            Some(text) if !text.is_empty() => KubeVersion::parse(text)?,
            _ => KubeVersion::default_version(),
        };
        let mut api_versions: Vec<String> = DEFAULT_API_VERSIONS
            .iter()
            .map(ToString::to_string)
            .collect();
        api_versions.extend(extra.iter().cloned());
        Ok(Capabilities {
            kube_version: Rc::new(kube_version),
            api_versions: Rc::new(VersionSet(api_versions)),
        })
    }
}

impl Object for Capabilities {
    fn type_name(&self) -> String {
        "*common.Capabilities".into()
    }

    fn kind_name(&self) -> &'static str {
        "ptr"
    }

    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "KubeVersion" => Some(Value::Object(self.kube_version.clone())),
            "APIVersions" => Some(Value::Object(self.api_versions.clone())),
            "HelmVersion" => Some(Value::Object(Rc::new(HelmVersion))),
            _ => None,
        }
    }

    fn format(&self) -> String {
        format!(
            "&{{{} {} {}}}",
            self.kube_version.format(),
            self.api_versions.format(),
            HelmVersion.format()
        )
    }

    fn to_data(&self) -> Value {
        Value::map(BTreeMap::from([
            ("KubeVersion".to_string(), self.kube_version.to_data()),
            ("APIVersions".to_string(), self.api_versions.to_data()),
            ("HelmVersion".to_string(), HelmVersion.to_data()),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_versions_parse_as_helm() {
        // Answers of Helm v4.2.3 (Version, %v form).
        for (input, version, formatted, string) in [
            ("1.22", "v1.22", "{v1.22 v1.22 1 22}", "v1.22"),
            ("1.22.3", "v1.22.3", "{v1.22.3 v1.22.3 1 22}", "v1.22.3"),
            (
                "v1.29.0-gke.1",
                "v1.29.0-gke.1",
                "{v1.29.0-gke.1 v1.29.0 1 29}",
                "v1.29.0",
            ),
            ("1.2.3.4", "v1.2.3.4", "{v1.2.3.4 v1.2.3.4 1 2}", "v1.2.3.4"),
            ("v1.30", "v1.30", "{v1.30 v1.30 1 30}", "v1.30"),
        ] {
            let kv = KubeVersion::parse(input).unwrap();
            assert_eq!(kv.version, version);
            assert_eq!(kv.format(), formatted);
            assert_eq!(
                kv.method("String", &[]).unwrap().unwrap().to_string(),
                string
            );
        }
        assert_eq!(
            KubeVersion::parse("abc").unwrap_err(),
            "could not parse \"abc\" as version"
        );
        assert_eq!(
            KubeVersion::parse("1").unwrap_err(),
            "illegal version string \"1\""
        );
    }

    #[test]
    fn capabilities_print_as_helm() {
        let caps = Capabilities::new(None, &[]).unwrap();
        // `printf "%v" .Capabilities` in Helm v4.2.3.
        let want = concat!(
            "&{{v1.36.0 v1.36.0 1 36} [v1 admissionregistration.k8s.io/v1 ",
            "admissionregistration.k8s.io/v1alpha1 admissionregistration.k8s.io/v1beta1 ",
            "internal.apiserver.k8s.io/v1alpha1 apps/v1 apps/v1beta1 apps/v1beta2 ",
            "authentication.k8s.io/v1 authentication.k8s.io/v1alpha1 ",
            "authentication.k8s.io/v1beta1 authorization.k8s.io/v1 ",
            "authorization.k8s.io/v1beta1 autoscaling/v1 autoscaling/v2 batch/v1 ",
            "batch/v1beta1 certificates.k8s.io/v1 certificates.k8s.io/v1beta1 ",
            "certificates.k8s.io/v1alpha1 coordination.k8s.io/v1alpha2 ",
            "coordination.k8s.io/v1beta1 coordination.k8s.io/v1 discovery.k8s.io/v1 ",
            "discovery.k8s.io/v1beta1 events.k8s.io/v1 events.k8s.io/v1beta1 ",
            "extensions/v1beta1 flowcontrol.apiserver.k8s.io/v1 ",
            "flowcontrol.apiserver.k8s.io/v1beta1 flowcontrol.apiserver.k8s.io/v1beta2 ",
            "flowcontrol.apiserver.k8s.io/v1beta3 networking.k8s.io/v1 ",
            "networking.k8s.io/v1beta1 node.k8s.io/v1 node.k8s.io/v1alpha1 ",
            "node.k8s.io/v1beta1 policy/v1 policy/v1beta1 rbac.authorization.k8s.io/v1 ",
            "rbac.authorization.k8s.io/v1beta1 rbac.authorization.k8s.io/v1alpha1 ",
            "resource.k8s.io/v1 resource.k8s.io/v1beta2 resource.k8s.io/v1beta1 ",
            "resource.k8s.io/v1alpha3 scheduling.k8s.io/v1alpha2 scheduling.k8s.io/v1beta1 ",
            "scheduling.k8s.io/v1 storage.k8s.io/v1beta1 storage.k8s.io/v1 ",
            "storage.k8s.io/v1alpha1 storagemigration.k8s.io/v1beta1 ",
            "apiextensions.k8s.io/v1beta1 apiextensions.k8s.io/v1] {v4.2   go1.26.6 v1.36}}",
        );
        assert_eq!(caps.format(), want);
        assert_eq!(
            HelmVersion.format(),
            "{v4.2   go1.26.6 v1.36}",
            "HelmVersion %v"
        );
        let with = Capabilities::new(Some("1.22"), &["x/v1/K".to_string()]).unwrap();
        let apis = with.field("APIVersions").unwrap();
        let Value::Object(apis) = apis else {
            panic!("an object")
        };
        let has = |s: &str| {
            apis.method("Has", &[Value::str(s)])
                .unwrap()
                .unwrap()
                .truth()
        };
        assert!(has("x/v1/K"));
        assert!(has("v1"));
        assert!(!has("x/v1"));
        assert!(!has("apps/v1/Deployment"));
    }
}
