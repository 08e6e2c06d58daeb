//! A render of a chart: every template executed with its chart's values, as Helm's
//! `engine.Render` does after the install action has prepared the values.
//!
//! All templates of the chart and its subcharts form one template set, named by path
//! (`chart/templates/x.yaml`, `chart/charts/sub/templates/y.yaml`) and parsed deepest first so
//! that a parent's `define` replaces a subchart's of the same name. Every template that is not a
//! partial (`_*`) is executed with its chart's scope as dot: `.Values` scoped by the (alias)
//! name, `.Chart`, `.Files`, `.Subcharts`, and the shared `.Release` and `.Capabilities`.

mod capabilities;
mod errors;
mod files;
mod glob;

use std::collections::BTreeMap;
use std::rc::Rc;

pub use capabilities::{Capabilities, KubeVersion};
pub use files::Files;
pub use glob::Glob;

use crate::chart::{Chart, Metadata};
use crate::template::{Env, Set};
use crate::value::Value;

/// What a render is told about the release and the cluster (Helm's install/upgrade action and
/// `--kube-version`/`--api-versions`).
#[derive(Debug, Clone)]
pub struct Options {
    /// `.Release.Name`.
    pub release_name: String,
    /// `.Release.Namespace`.
    pub namespace: String,
    /// `.Release.Revision` (1 for an install).
    pub revision: u32,
    /// `.Release.IsInstall`.
    pub is_install: bool,
    /// `.Release.IsUpgrade`.
    pub is_upgrade: bool,
    /// `--kube-version` as given (`1.29.0`, `v1.29`); `None` is Helm's default (v1.36.0).
    pub kube_version: Option<String>,
    /// Extra `.Capabilities.APIVersions` entries (`group/version` or `group/version/Kind`).
    pub api_versions: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            release_name: "release-name".into(),
            namespace: "default".into(),
            revision: 1,
            is_install: true,
            is_upgrade: false,
            kube_version: None,
            api_versions: Vec::new(),
        }
    }
}

/// A failed render, in Helm's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// The message as Helm prints it.
    pub message: String,
}

/// Renders `chart` with the user's `values` (already merged from `-f`/`--set`): dependencies
/// processed, values coalesced and schema-checked, every template executed. Returns the text of
/// every template by path (`chart/templates/x.yaml`, `chart/charts/sub/templates/y.yaml`,
/// `NOTES.txt` files included, partials left out), as Helm's SDK render returns it.
pub fn render(
    chart: &Chart,
    values: &serde_json::Map<String, serde_json::Value>,
    options: &Options,
    env: &mut Env,
) -> Result<BTreeMap<String, String>, Error> {
    render_owned(chart.clone(), values, options, env).map(|(files, _)| files)
}

/// [`render`] of a chart the caller gives up, returning the chart as prepared (dependencies
/// processed: disabled subcharts out, aliases in) with the rendered files.
pub fn render_owned(
    chart: Chart,
    values: &serde_json::Map<String, serde_json::Value>,
    options: &Options,
    env: &mut Env,
) -> Result<(BTreeMap<String, String>, Chart), Error> {
    let capabilities = Capabilities::new(options.kube_version.as_deref(), &options.api_versions)
        .map_err(Error::new)?;
    let (chart, values) =
        crate::chart::prepare_owned(chart, values).map_err(|e| Error::new(e.message))?;
    let values = Value::from_json(&serde_json::Value::Object(values));
    let mut chart = chart;
    // `.Files` shares the files this render owns instead of copying them; they go back into
    // the chart afterwards (nothing of the render holds them by then).
    let detached = Detached::take(&mut chart);
    let files = render_with_files(&chart, values, options, capabilities, env, Some(&detached));
    detached.put_back(&mut chart);
    Ok((files?, chart))
}

/// The files of a chart and of its subcharts (in the same order), taken out of the chart to
/// be shared with the render's `.Files`.
struct Detached {
    files: Rc<Vec<crate::chart::File>>,
    dependencies: Vec<Detached>,
}

impl Detached {
    fn take(chart: &mut Chart) -> Detached {
        Detached {
            files: Rc::new(std::mem::take(&mut chart.files)),
            dependencies: chart.dependencies.iter_mut().map(Detached::take).collect(),
        }
    }

    fn put_back(self, chart: &mut Chart) {
        chart.files = Rc::try_unwrap(self.files).unwrap_or_else(|files| (*files).clone());
        for (sub, detached) in chart.dependencies.iter_mut().zip(self.dependencies) {
            detached.put_back(sub);
        }
    }
}

/// Renders an already prepared chart (dependencies processed, `values` coalesced and
/// validated): Helm's `engine.Render` proper.
pub fn render_values(
    chart: &Chart,
    values: Value,
    options: &Options,
    capabilities: Capabilities,
    env: &mut Env,
) -> Result<BTreeMap<String, String>, Error> {
    render_with_files(chart, values, options, capabilities, env, None)
}

/// [`render_values`], with the chart's files (`detached`) held apart from it when given.
fn render_with_files(
    chart: &Chart,
    values: Value,
    options: &Options,
    capabilities: Capabilities,
    env: &mut Env,
    detached: Option<&Detached>,
) -> Result<BTreeMap<String, String>, Error> {
    let top = Scope {
        release: release(options),
        capabilities: Value::Object(Rc::new(capabilities)),
        values,
    };
    let mut renderables = BTreeMap::new();
    collect(chart, detached, None, &top, &mut renderables);

    // Helm's parse and execution order: more path segments first, then names descending.
    let mut order: Vec<&String> = renderables.keys().collect();
    order.sort_by(|a, b| {
        let depth = |s: &str| s.bytes().filter(|&c| c == b'/').count();
        depth(b).cmp(&depth(a)).then_with(|| b.cmp(a))
    });

    // With Go's parameter types, so that calls get Go's argument checks and their errors.
    let (funcs, signatures) = HELM_FUNCS.with(Clone::clone);
    let mut set = Set::with_signatures(funcs, signatures);
    for name in &order {
        let renderable = &renderables[*name];
        set.parse(name, &renderable.text)
            .map_err(|e| Error::new(errors::parse_error(name, &e.message)))?;
    }

    let mut rendered = BTreeMap::new();
    for name in order {
        if is_partial(name) {
            continue;
        }
        let renderable = &renderables[name];
        if let Value::Map(scope) = &renderable.scope {
            let template = BTreeMap::from([
                ("Name".to_string(), Value::str(name)),
                ("BasePath".to_string(), Value::str(&renderable.base_path)),
            ]);
            scope
                .borrow_mut()
                .insert("Template".into(), Value::map(template));
        }
        let text = set
            .execute(name, renderable.scope.clone(), env)
            .map_err(|e| Error::new(errors::exec_error(name, &e.message)))?;
        // Helm drops `<no value>` from every output; most have none, and keep their text.
        let text = if text.contains("<no value>") {
            text.replace("<no value>", "")
        } else {
            text
        };
        rendered.insert(name.clone(), text);
    }
    Ok(rendered)
}

thread_local! {
    /// Helm's function map and signatures, built once per thread: one map for every render
    /// also lets the template set reuse the parses of earlier renders.
    static HELM_FUNCS: (Rc<crate::template::FuncMap>, Rc<crate::template::Signatures>) = (
        Rc::new(crate::funcs::helm()),
        Rc::new(crate::template::helm_signatures()),
    );
}

impl Error {
    fn new(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
        }
    }
}

/// What every chart's scope shares.
struct Scope {
    release: Value,
    capabilities: Value,
    values: Value,
}

/// One template to parse and maybe execute.
struct Renderable<'a> {
    /// Borrowed from the chart unless it had to be made valid UTF-8.
    text: std::borrow::Cow<'a, str>,
    /// The dot of the template: its chart's scope map (shared by the chart's templates).
    scope: Value,
    base_path: String,
}

/// Whether a template path names a partial (Helm never outputs those).
fn is_partial(path: &str) -> bool {
    path.rsplit('/').next().unwrap_or(path).starts_with('_')
}

/// Adds `chart`'s templates (and its subcharts') to `out` and returns its scope map (Helm's
/// `recAllTpls`).
fn collect<'a>(
    chart: &'a Chart,
    detached: Option<&Detached>,
    parent: Option<(&str, &Value)>,
    top: &Scope,
    out: &mut BTreeMap<String, Renderable<'a>>,
) -> Value {
    let name = &chart.metadata.name;
    let full_path = match parent {
        Some((parent_path, _)) => format!("{parent_path}/charts/{name}"),
        None => name.clone(),
    };
    let values = match parent {
        None => top.values.clone(),
        Some((_, parent_scope)) => sub_table(parent_scope, name).unwrap_or_else(Value::empty_map),
    };
    let subcharts = Value::empty_map();
    let scope = Value::map(BTreeMap::from([
        (
            "Chart".to_string(),
            chart_value(&chart.metadata, parent.is_none()),
        ),
        (
            "Files".to_string(),
            Value::Object(Rc::new(match detached {
                Some(detached) => Files::shared(Rc::clone(&detached.files)),
                None => Files::new(&chart.files),
            })),
        ),
        ("Release".to_string(), top.release.clone()),
        ("Capabilities".to_string(), top.capabilities.clone()),
        ("Values".to_string(), values),
        ("Subcharts".to_string(), subcharts.clone()),
    ]));

    for (i, child) in chart.dependencies.iter().enumerate() {
        let child_detached = detached.and_then(|d| d.dependencies.get(i));
        let child_scope = collect(child, child_detached, Some((&full_path, &scope)), top, out);
        if let Value::Map(map) = &subcharts {
            map.borrow_mut()
                .insert(child.metadata.name.clone(), child_scope);
        }
    }

    let library = chart.metadata.chart_type.eq_ignore_ascii_case("library");
    for template in &chart.templates {
        if library && !is_partial(&template.name) {
            continue;
        }
        out.insert(
            format!("{full_path}/{}", template.name),
            Renderable {
                // Valid UTF-8 (nearly every template) is checked much faster than the lossy
                // conversion checks it.
                text: std::str::from_utf8(&template.data).map_or_else(
                    |_| String::from_utf8_lossy(&template.data),
                    std::borrow::Cow::Borrowed,
                ),
                scope: scope.clone(),
                base_path: format!("{full_path}/templates"),
            },
        );
    }
    scope
}

/// `parent_scope.Values.<name>` when it is a map (Helm's `Values.Table`; a dotted name walks
/// down, as Helm splits the path on dots).
fn sub_table(parent_scope: &Value, name: &str) -> Option<Value> {
    let mut table = parent_scope.as_map()?.borrow().get("Values")?.clone();
    for key in name.split('.') {
        let next = table.as_map()?.borrow().get(key)?.clone();
        next.as_map()?;
        table = next;
    }
    Some(table)
}

/// `.Release`.
fn release(options: &Options) -> Value {
    Value::map(BTreeMap::from([
        ("Name".to_string(), Value::str(&options.release_name)),
        ("Namespace".to_string(), Value::str(&options.namespace)),
        ("IsUpgrade".to_string(), Value::Bool(options.is_upgrade)),
        ("IsInstall".to_string(), Value::Bool(options.is_install)),
        (
            "Revision".to_string(),
            Value::Int(i64::from(options.revision)),
        ),
        ("Service".to_string(), Value::str("Helm")),
    ]))
}

/// `.Chart`: Helm v4 hands templates the metadata as a map of its Go field names (nested
/// structs as maps, slices as `[]interface{}`), plus `IsRoot`.
pub fn chart_value(metadata: &Metadata, is_root: bool) -> Value {
    let extra = &metadata.extra;
    let text = |key: &str| Value::str(extra.get(key).and_then(|v| v.as_str()).unwrap_or(""));
    let strings = |key: &str| {
        let items = extra
            .get(key)
            .and_then(|v| v.as_array())
            .map(|items| items.iter().map(Value::from_json).collect())
            .unwrap_or_default();
        Value::list(items)
    };
    let maintainers = extra
        .get("maintainers")
        .and_then(|v| v.as_array())
        .map(|items| {
            items
                .iter()
                .map(|m| match m.as_object() {
                    None => Value::Nil,
                    Some(m) => {
                        let field =
                            |k: &str| Value::str(m.get(k).and_then(|v| v.as_str()).unwrap_or(""));
                        Value::map(BTreeMap::from([
                            ("Name".to_string(), field("name")),
                            ("Email".to_string(), field("email")),
                            ("URL".to_string(), field("url")),
                        ]))
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let annotations = extra
        .get("annotations")
        .and_then(|v| v.as_object())
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), Value::str(v.as_str().unwrap_or(""))))
                .collect()
        })
        .unwrap_or_default();
    let dependencies = metadata
        .dependencies
        .iter()
        .map(|d| {
            Value::map(BTreeMap::from([
                ("Name".to_string(), Value::str(&d.name)),
                ("Version".to_string(), Value::str(&d.version)),
                ("Repository".to_string(), Value::str(&d.repository)),
                ("Condition".to_string(), Value::str(&d.condition)),
                (
                    "Tags".to_string(),
                    Value::list(d.tags.iter().map(Value::str).collect()),
                ),
                ("Enabled".to_string(), Value::Bool(d.enabled)),
                (
                    "ImportValues".to_string(),
                    Value::list(d.import_values.iter().map(Value::from_json).collect()),
                ),
                ("Alias".to_string(), Value::str(&d.alias)),
            ]))
        })
        .collect();
    Value::map(BTreeMap::from([
        ("Name".to_string(), Value::str(&metadata.name)),
        ("Home".to_string(), text("home")),
        ("Sources".to_string(), strings("sources")),
        ("Version".to_string(), Value::str(&metadata.version)),
        ("Description".to_string(), text("description")),
        ("Keywords".to_string(), strings("keywords")),
        ("Maintainers".to_string(), Value::list(maintainers)),
        ("Icon".to_string(), text("icon")),
        ("APIVersion".to_string(), Value::str(&metadata.api_version)),
        ("Condition".to_string(), text("condition")),
        ("Tags".to_string(), text("tags")),
        ("AppVersion".to_string(), Value::str(&metadata.app_version)),
        (
            "Deprecated".to_string(),
            Value::Bool(
                extra
                    .get("deprecated")
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(false),
            ),
        ),
        ("Annotations".to_string(), Value::map(annotations)),
        (
            "KubeVersion".to_string(),
            Value::str(&metadata.kube_version),
        ),
        ("Dependencies".to_string(), Value::list(dependencies)),
        ("Type".to_string(), Value::str(&metadata.chart_type)),
        ("IsRoot".to_string(), Value::Bool(is_root)),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::{Dependency, File};

    fn file(name: &str, text: &str) -> File {
        File {
            name: name.into(),
            data: text.as_bytes().to_vec(),
        }
    }

    fn metadata(name: &str, version: &str) -> Metadata {
        Metadata {
            api_version: "v2".into(),
            name: name.into(),
            version: version.into(),
            ..Metadata::default()
        }
    }

    fn values(json: &str) -> serde_json::Map<String, serde_json::Value> {
        serde_json::from_str(json).expect("test values are JSON")
    }

    fn env() -> Env {
        Env::fixed(1, jiff::Zoned::now())
    }

    fn options() -> Options {
        Options {
            release_name: "r".into(),
            namespace: "ns".into(),
            ..Options::default()
        }
    }

    /// A parent with the same subchart twice (once under an alias).
    fn parent_chart() -> Chart {
        let sub = |name: &str, v: &str| Chart {
            metadata: metadata(name, "0.2.0"),
            templates: vec![
                file(
                    "templates/b.yaml",
                    "name: {{ .Chart.Name }} root={{ .Chart.IsRoot }} v={{ .Values.v }} \
                     g={{ .Values.global.g }} mut={{ .Values.mut }} tmpl={{ .Template.Name }}\n\
                     {{ include \"shared\" . }}\n",
                ),
                file(
                    "templates/_h.tpl",
                    "{{ define \"shared\" }}sub {{ .Chart.Name }}{{ end }}\n",
                ),
                file("templates/NOTES.txt", "sub notes\n"),
                file("templates/empty.yaml", ""),
            ],
            values: values(&format!(r#"{{"v":"{v}"}}"#)),
            ..Chart::default()
        };
        let mut meta = metadata("par", "0.1.0");
        meta.extra = values(
            r#"{"description":"d","keywords":["a","b"],
                "maintainers":[{"name":"me","email":"m@x"}],"annotations":{"x":"y"}}"#,
        );
        meta.dependencies = vec![
            Dependency {
                name: "sub".into(),
                version: "0.2.0".into(),
                tags: vec!["t".into()],
                import_values: vec![serde_json::json!("data")],
                alias: "s1".into(),
                ..Dependency::default()
            },
            Dependency {
                name: "sub".into(),
                version: "0.2.0".into(),
                condition: "s2.enabled".into(),
                ..Dependency::default()
            },
        ];
        Chart {
            metadata: meta,
            templates: vec![
                file(
                    "templates/a.yaml",
                    "chart: {{ .Chart }}\nkeys: {{ .Subcharts | keys | sortAlpha }}\n\
                     tmpl: {{ .Template }}\nover: {{ include \"shared\" . }}\n\
                     {{ $_ := set .Values \"mut\" \"fromA\" }}\n",
                ),
                file(
                    "templates/_h.tpl",
                    "{{ define \"shared\" }}parent {{ .Chart.Name }}{{ end }}\n",
                ),
                file("templates/NOTES.txt", "notes {{ .Release.Name }}\n"),
            ],
            values: values(r#"{"a":1,"global":{"g":1},"s1":{"v":"one"}}"#),
            dependencies: vec![sub("sub", "def")],
            ..Chart::default()
        }
    }

    #[test]
    fn scopes_order_and_overrides_as_helm() {
        let out = render(
            &parent_chart(),
            &values(r#"{"s2":{"enabled":true}}"#),
            &options(),
            &mut env(),
        )
        .unwrap();
        // Helm v4.2.3's render of the same chart.
        let want = [
            ("par/charts/s1/templates/NOTES.txt", "sub notes\n"),
            (
                "par/charts/s1/templates/b.yaml",
                "name: s1 root=false v=one g=1 mut= tmpl=par/charts/s1/templates/b.yaml\n\
                 parent s1\n",
            ),
            ("par/charts/s1/templates/empty.yaml", ""),
            ("par/charts/sub/templates/NOTES.txt", "sub notes\n"),
            (
                "par/charts/sub/templates/b.yaml",
                "name: sub root=false v=def g=1 mut= tmpl=par/charts/sub/templates/b.yaml\n\
                 parent sub\n",
            ),
            ("par/charts/sub/templates/empty.yaml", ""),
            ("par/templates/NOTES.txt", "notes r\n"),
            (
                "par/templates/a.yaml",
                "chart: map[APIVersion:v2 Annotations:map[x:y] AppVersion: Condition: \
                 Dependencies:[map[Alias:s1 Condition: Enabled:true \
                 ImportValues:[map[child:exports.data parent:.]] Name:s1 Repository: \
                 Tags:[t] Version:0.2.0] map[Alias: Condition:s2.enabled Enabled:true \
                 ImportValues:[] Name:sub Repository: Tags:[] Version:0.2.0]] \
                 Deprecated:false Description:d Home: Icon: IsRoot:true Keywords:[a b] \
                 KubeVersion: Maintainers:[map[Email:m@x Name:me URL:]] Name:par Sources:[] \
                 Tags: Type: Version:0.1.0]\nkeys: [s1 sub]\n\
                 tmpl: map[BasePath:par/templates Name:par/templates/a.yaml]\n\
                 over: parent par\n\n",
            ),
        ];
        let got: Vec<(&str, &str)> = out.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn capabilities_files_and_release_as_helm() {
        let mut meta = metadata("c2", "1.0.0");
        meta.app_version = "2.0".into();
        let chart = Chart {
            metadata: meta,
            templates: vec![file(
                "templates/t.yaml",
                "kube: {{ .Capabilities.KubeVersion.Version }} \
                 {{ .Capabilities.KubeVersion.Major }} {{ .Capabilities.KubeVersion.Minor }} \
                 {{ .Capabilities.KubeVersion.GitVersion }}\n\
                 has: {{ .Capabilities.APIVersions.Has \"x.example.com/v1/Widget\" }} \
                 {{ .Capabilities.APIVersions.Has \"apps/v1\" }}\n\
                 helm: {{ .Capabilities.HelmVersion.Version }} {{ .Capabilities.KubeVersion }} \
                 {{ printf \"%v\" .Capabilities.KubeVersion }}\n\
                 get: {{ .Files.Get \"files/b.txt\" }}\
                 lines: {{ .Files.Lines \"files/a.yaml\" }}\n\
                 x: {{ .Values.x }} missing: {{ .Values.nope }}!\n\
                 release: {{ .Release.Name }} {{ .Release.Namespace }} {{ .Release.Revision }} \
                 {{ .Release.IsInstall }} {{ .Release.IsUpgrade }} {{ .Release.Service }}\n\
                 app: {{ .Chart.AppVersion }} {{ .Template.BasePath }}\n",
            )],
            files: vec![file("files/a.yaml", "a: 1\n"), file("files/b.txt", "b\n")],
            values: values(r#"{"x":1000000.0}"#),
            ..Chart::default()
        };
        let options = Options {
            release_name: "rel".into(),
            namespace: "nsx".into(),
            revision: 3,
            is_install: false,
            is_upgrade: true,
            kube_version: Some("1.29.3".into()),
            api_versions: vec!["x.example.com/v1/Widget".into()],
        };
        let out = render(&chart, &values("{}"), &options, &mut env()).unwrap();
        assert_eq!(
            out["c2/templates/t.yaml"],
            "kube: v1.29.3 1 29 v1.29.3\nhas: true true\nhelm: v4.2 v1.29.3 {v1.29.3 v1.29.3 1 29}\n\
             get: b\n\
             lines: [a: 1]\nx: 1e+06 missing: !\nrelease: rel nsx 3 false true Helm\n\
             app: 2.0 c2/templates\n"
        );
        let bad = Options {
            kube_version: Some("abc".into()),
            ..Options::default()
        };
        assert_eq!(
            render(&chart, &values("{}"), &bad, &mut env())
                .unwrap_err()
                .message,
            "could not parse \"abc\" as version"
        );
    }

    #[test]
    fn failures_name_the_template_as_helm() {
        let chart = |text: &str| Chart {
            metadata: metadata("t", "0.1.0"),
            templates: vec![file("templates/t.yaml", text)],
            ..Chart::default()
        };
        let fails = |text: &str| {
            render(&chart(text), &values("{}"), &options(), &mut env())
                .unwrap_err()
                .message
        };
        assert_eq!(
            fails("{{ fail \"a\\nb\" }}"),
            "execution error at (t/templates/t.yaml:1:3): a\nb"
        );
        assert_eq!(
            fails("{{ required \"need x\" .Values.x }}"),
            "execution error at (t/templates/t.yaml:1:3): need x"
        );
        assert_eq!(
            fails("{{ if }}"),
            "parse error at (t/templates/t.yaml:1): missing value for if"
        );
        assert_eq!(
            fails("{{ .Values.x }}|{{ .Values.x.y }}"),
            "t/templates/t.yaml:1:26\n  executing \"t/templates/t.yaml\" at <.Values.x.y>:\n    \
             nil pointer evaluating interface {}.y"
        );
        assert_eq!(
            fails("{{ define \"x\" }}{{ fail \"in x\" }}{{ end }}{{ include \"x\" . }}"),
            "execution error at (t/templates/t.yaml:1:45): in x"
        );
        // A failing NOTES.txt of a subchart fails the render.
        let mut parent = chart("ok");
        let mut sub = chart("");
        sub.metadata.name = "sub".into();
        sub.templates = vec![file("templates/NOTES.txt", "{{ fail \"notes\" }}")];
        parent.dependencies.push(sub);
        assert_eq!(
            render(&parent, &values("{}"), &options(), &mut env())
                .unwrap_err()
                .message,
            "execution error at (t/charts/sub/templates/NOTES.txt:1:3): notes"
        );
    }

    #[test]
    fn library_charts_give_only_partials() {
        let mut lib = Chart {
            metadata: metadata("lib", "1.0.0"),
            templates: vec![
                file(
                    "templates/_x.tpl",
                    "{{ define \"lib.x\" }}from lib{{ end }}",
                ),
                file("templates/cm.yaml", "never rendered"),
            ],
            ..Chart::default()
        };
        lib.metadata.chart_type = "library".into();
        let app = Chart {
            metadata: metadata("app", "1.0.0"),
            templates: vec![file("templates/a.yaml", "{{ include \"lib.x\" . }}")],
            dependencies: vec![lib.clone()],
            ..Chart::default()
        };
        let out = render(&app, &values("{}"), &options(), &mut env()).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out["app/templates/a.yaml"], "from lib");
        let alone = render(&lib, &values("{}"), &options(), &mut env()).unwrap();
        assert!(alone.is_empty());
    }
}
