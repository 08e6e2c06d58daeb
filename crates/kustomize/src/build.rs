//! Accumulating a kustomization tree into objects: resources, generators, components,
//! transformers, then the top-level finishing steps (hash suffixes, name references, vars).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::TransformerConfig;
use crate::error::{Error, TransformError};
use crate::fs::{Confined, DiskFs, FileSystem, absolute, normalize};
use crate::remote::{RemoteLoader, is_remote, parse_remote_target};
use crate::resource::{ResId, Resource};
use crate::smp::Schemas;
use crate::types::{Kustomization, Var};
use crate::{generate, transform, yaml};

/// Which files a kustomization may read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoadRestrictor {
    /// Files must sit in or below the kustomization's own directory (kustomize's default).
    #[default]
    RootOnly,
    /// Any file may be read.
    None,
}

/// Build settings.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// File access policy.
    pub load_restrictor: LoadRestrictor,
    /// Fetches remote bases (`resources:` entries naming a Git repository, see
    /// [`RemoteTarget`](crate::RemoteTarget)); `None` (the default) refuses them with
    /// [`Error::Remote`], naming the kustomization file and the entry. The engine itself
    /// never uses the network.
    pub remote: Option<std::sync::Arc<dyn RemoteLoader>>,
    /// Add `app.kubernetes.io/managed-by: kustomize-<version>` to every object.
    pub add_managed_by_label: bool,
    /// An outer boundary no file of the build may come from, whatever the load restrictor
    /// and whichever field names it (resources, bases, components, generators, patches,
    /// replacements, openapi, configurations, crds, transformers): the root of the source
    /// the build comes from. Symbolic links are resolved before the check, and a path leaving
    /// it is refused with [`Error::OutsideBoundary`] whether or not it exists. `None` (the
    /// default) keeps `kubectl kustomize`'s behaviour, where `../` directories may be read
    /// from anywhere.
    pub boundary: Option<PathBuf>,
    /// Render `helmCharts` (kustomize's `--enable-helm`) with the native Helm engine, from
    /// charts present under the chart home; never pulled. Off by default, where a
    /// kustomization with charts fails as kustomize does without the flag. Flux's
    /// kustomize-controller never enables it.
    pub enable_helm: bool,
}

/// The version string of the managed-by label (kubectl's embedded kustomize prints `(devel)`).
pub const MANAGED_BY_VERSION: &str = "(devel)";

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Objects plus the configuration and vars gathered on the way up.
#[derive(Default)]
pub(crate) struct Accumulator {
    pub resources: Vec<Resource>,
    pub config: TransformerConfig,
    pub vars: Vec<Var>,
    /// Keys ([`ResId::key`]) of `resources`, built on demand by [`Accumulator::append`];
    /// dropped by [`Accumulator::invalidate`] whenever transformers may have renamed objects.
    index: Option<HashSet<ResId>>,
}

impl Accumulator {
    fn empty() -> Self {
        Accumulator {
            config: TransformerConfig::builtin(),
            ..Accumulator::default()
        }
    }

    /// Forgets the id index (call after anything that may change ids).
    pub fn invalidate(&mut self) {
        self.index = None;
    }

    /// Appends, refusing duplicate ids.
    pub fn append(&mut self, resource: Resource, context: &str) -> Result<(), TransformError> {
        let resources = &self.resources;
        let index = self
            .index
            .get_or_insert_with(|| resources.iter().map(|r| r.current_id().key()).collect());
        let id = resource.current_id();
        if !index.insert(id.key()) {
            return Err(format!(
                "{context}: may not add resource with an already registered id: {id}"
            )
            .into());
        }
        self.resources.push(resource);
        Ok(())
    }

    fn merge(&mut self, other: Accumulator, context: &str) -> Result<(), TransformError> {
        self.resources.reserve(other.resources.len());
        for resource in other.resources {
            self.append(resource, context)?;
        }
        self.config.merge(other.config);
        for var in other.vars {
            if self.vars.iter().any(|v| v.name == var.name) {
                return Err(format!("{context}: var '{}' already encountered", var.name).into());
            }
            self.vars.push(var);
        }
        Ok(())
    }
}

/// One kustomization directory being built.
pub(crate) struct Target {
    pub dir: PathBuf,
    pub file: PathBuf,
    pub kustomization: Kustomization,
}

pub(crate) struct Builder<'a> {
    pub fs: &'a dyn FileSystem,
    pub options: &'a BuildOptions,
    /// The outer boundary ([`BuildOptions::boundary`]); `fs` is already confined to it, this
    /// copy names the refusal clearly.
    boundary: Option<&'a Confined<'a>>,
    /// Patch schemas; `openapi:` documents add to them for the rest of the build, as
    /// kustomize's global schema.
    pub schemas: Schemas,
    /// The directory being built; origins are written relative to it.
    root: PathBuf,
    /// Record where objects come from (`buildMetadata: [originAnnotations]`).
    track_origins: bool,
    /// Record which transformers touched objects (`buildMetadata: [transformerAnnotations]`).
    track_transformations: bool,
    stack: Vec<PathBuf>,
}

/// Builds the kustomization in `dir` on `fs`.
pub fn build_with(
    fs: &dyn FileSystem,
    dir: &Path,
    options: &BuildOptions,
) -> Result<Vec<Value>, Error> {
    let dir = absolute(dir);
    let confined = options
        .boundary
        .as_deref()
        .map(|root| Confined::new(fs, root));
    let fs: &dyn FileSystem = match &confined {
        Some(confined) => confined,
        None => fs,
    };
    let boundary = confined.as_ref();
    if let Some(boundary) = boundary
        && boundary.resolve(&dir).is_none()
    {
        return Err(Error::OutsideBoundary {
            file: dir.clone(),
            field: "build".into(),
            entry: dir.display().to_string(),
        });
    }
    let mut builder = Builder {
        fs,
        options,
        boundary,
        schemas: Schemas::default(),
        root: dir.clone(),
        track_origins: false,
        track_transformations: false,
        stack: Vec::new(),
    };
    let target = builder.load_target(&dir, None)?;
    let metadata = &target.kustomization.build_metadata;
    builder.track_origins = metadata.iter().any(|m| m == "originAnnotations");
    builder.track_transformations = metadata.iter().any(|m| m == "transformerAnnotations");
    // A `kind: Component` directory builds on its own like a Kustomization, as
    // `kubectl kustomize` does; only `resources` refuse to name one.
    builder.stack.push(dir.clone());
    let mut accumulator = builder.accumulate_target(&target, Accumulator::empty())?;
    builder.stack.pop();

    transform::add_hash_suffixes(&mut accumulator.resources);
    transform::fix_name_references(&mut accumulator.resources, &accumulator.config)
        .map_err(|message| Error::transform(&target.file, "nameReference", message))?;
    transform::resolve_vars(
        &mut accumulator.resources,
        &accumulator.vars,
        &accumulator.config,
    )
    .map_err(|message| Error::transform(&target.file, "vars", message))?;
    accumulator.resources.retain(|r| {
        r.object
            .pointer("/metadata/annotations/config.kubernetes.io~1local-config")
            .and_then(Value::as_str)
            != Some("true")
    });

    let k = &target.kustomization;
    transform::sort(&mut accumulator.resources, k.sort_options.as_ref())
        .map_err(|message| Error::transform(&target.file, "sortOptions", message))?;

    let managed =
        options.add_managed_by_label || k.build_metadata.iter().any(|m| m == "managedByLabel");
    let (origins, transformations) = (builder.track_origins, builder.track_transformations);
    let mut out = Vec::with_capacity(accumulator.resources.len());
    for mut resource in accumulator.resources {
        if managed {
            let mut labels = resource.labels();
            labels.insert(
                "app.kubernetes.io/managed-by".into(),
                Value::String(format!("kustomize-{MANAGED_BY_VERSION}")),
            );
            resource.set_string_map("labels", labels);
        }
        if origins && let Some(origin) = &resource.origin {
            let mut annotations = resource.annotations();
            annotations.insert(
                "config.kubernetes.io/origin".into(),
                Value::String(yaml::to_yaml_document_in_order(origin)),
            );
            resource.set_string_map("annotations", annotations);
        }
        if transformations && !resource.transformations.is_empty() {
            let mut annotations = resource.annotations();
            annotations.insert(
                "alpha.config.kubernetes.io/transformations".into(),
                Value::String(yaml::to_yaml_document_in_order(&Value::Array(
                    std::mem::take(&mut resource.transformations),
                ))),
            );
            resource.set_string_map("annotations", annotations);
        }
        resource.drop_empty_annotations();
        out.push(resource.object);
    }
    Ok(out)
}

impl Builder<'_> {
    /// Reads and checks the kustomization file of `dir`.
    pub fn load_target(&self, dir: &Path, field: Option<&str>) -> Result<Target, Error> {
        if !self.fs.is_dir(dir) {
            return Err(Error::NoKustomization {
                path: dir.to_path_buf(),
            });
        }
        let found: Vec<PathBuf> = KUSTOMIZATION_FILES
            .iter()
            .map(|name| dir.join(name))
            .filter(|p| self.fs.exists(p) && !self.fs.is_dir(p))
            .collect();
        let file = match found.as_slice() {
            [] => {
                return Err(Error::NoKustomization {
                    path: dir.to_path_buf(),
                });
            }
            [one] => one.clone(),
            _ => {
                return Err(Error::invalid(
                    dir,
                    field.unwrap_or("resources"),
                    "found multiple kustomization files",
                ));
            }
        };
        let text = self.read_text(&file)?;
        let kustomization = parse_kustomization(&text, &file)?;
        Ok(Target {
            dir: dir.to_path_buf(),
            file,
            kustomization,
        })
    }

    fn read_text(&self, path: &Path) -> Result<String, Error> {
        let bytes = self.fs.read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        String::from_utf8(bytes).map_err(|_| Error::Yaml {
            path: path.to_path_buf(),
            message: "file is not UTF-8".into(),
        })
    }

    /// `entry` of `field` joined to the target's directory: refused when it is a remote URL,
    /// or when it leaves the outer boundary — lexically or through a symbolic link — with
    /// the same error whether or not the path exists.
    pub(crate) fn confine(
        &self,
        target: &Target,
        entry: &str,
        field: &str,
    ) -> Result<PathBuf, Error> {
        if is_remote(entry) {
            return Err(Error::Remote {
                path: target.file.clone(),
                field: field.to_owned(),
                url: entry.to_owned(),
            });
        }
        let path = normalize(&target.dir.join(entry));
        if let Some(boundary) = self.boundary
            && boundary.resolve(&path).is_none()
        {
            return Err(Error::OutsideBoundary {
                file: target.file.clone(),
                field: field.to_owned(),
                entry: entry.to_owned(),
            });
        }
        Ok(path)
    }

    /// Resolves `entry` relative to the target and applies the load restrictor for files.
    pub fn resolve_file(
        &self,
        target: &Target,
        entry: &str,
        field: &str,
    ) -> Result<PathBuf, Error> {
        let path = self.confine(target, entry, field)?;
        if !self.fs.exists(&path) {
            return Err(Error::Io {
                path: path.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!(
                        "no such file or directory (field {field} of {})",
                        target.file.display()
                    ),
                ),
            });
        }
        if self.options.load_restrictor == LoadRestrictor::RootOnly {
            let root = self
                .fs
                .canonicalize(&target.dir)
                .unwrap_or_else(|_| target.dir.clone());
            let real = self.fs.canonicalize(&path).map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
            if !real.starts_with(&root) {
                return Err(Error::Restricted {
                    path,
                    root: target.dir.clone(),
                    field: field.to_owned(),
                });
            }
        }
        Ok(path)
    }

    /// Reads a file named by a field of the target, under the load restrictor.
    pub fn read_field_file(
        &self,
        target: &Target,
        entry: &str,
        field: &str,
    ) -> Result<Vec<u8>, Error> {
        let path = self.resolve_file(target, entry, field)?;
        if self.fs.is_dir(&path) {
            return Err(Error::invalid(
                &target.file,
                field,
                format!("{entry}: is a directory, expected a file"),
            ));
        }
        self.fs
            .read(&path)
            .map_err(|source| Error::Io { path, source })
    }

    pub fn read_field_text(
        &self,
        target: &Target,
        entry: &str,
        field: &str,
    ) -> Result<String, Error> {
        let bytes = self.read_field_file(target, entry, field)?;
        String::from_utf8(bytes).map_err(|_| Error::Yaml {
            path: target.dir.join(entry),
            message: "file is not UTF-8".into(),
        })
    }

    /// Reads YAML documents from a file named by a field.
    pub fn read_field_documents(
        &self,
        target: &Target,
        entry: &str,
        field: &str,
    ) -> Result<Vec<Value>, Error> {
        let text = self.read_field_text(target, entry, field)?;
        yaml::parse_documents(&text).map_err(|message| Error::Yaml {
            path: normalize(&target.dir.join(entry)),
            message: message.message,
        })
    }

    fn accumulate_target(
        &mut self,
        target: &Target,
        mut acc: Accumulator,
    ) -> Result<Accumulator, Error> {
        let k = &target.kustomization;
        if !k.validators.is_empty() {
            return Err(Error::Unsupported {
                path: target.file.clone(),
                field: "validators".into(),
                hint: " (validator plugins run programs)".into(),
            });
        }
        self.load_openapi(target)?;
        acc.invalidate();
        let mut resources = k.resources.clone();
        resources.extend(k.bases.iter().cloned());
        for entry in &resources {
            self.accumulate_resource(target, entry, "resources", &mut acc)?;
        }
        for entry in &k.configurations {
            let documents = self.read_field_documents(target, entry, "configurations")?;
            for document in documents {
                let config = TransformerConfig::from_value(&document).map_err(|message| {
                    Error::transform(&target.file, "configurations", message.within(entry))
                })?;
                acc.config.merge(config);
            }
        }
        for entry in &k.crds {
            let documents = self.read_field_documents(target, entry, "crds")?;
            for document in documents {
                acc.config.merge(transform::config_from_crd(&document));
            }
        }
        generate::run_generators(self, target, &mut acc)?;
        acc.invalidate();
        for entry in &k.components {
            if is_remote(entry) {
                acc = self.accumulate_remote_component(target, entry, acc)?;
                acc.invalidate();
                continue;
            }
            let dir = self.resolve_dir(target, entry, "components")?;
            let component = self.load_target(&dir, Some("components"))?;
            if component.kustomization.kind != "Component" {
                return Err(Error::invalid(
                    &component.file,
                    "kind",
                    format!(
                        "expected kind 'Component' for path '{}' but got '{}'",
                        dir.display(),
                        component.kustomization.kind
                    ),
                ));
            }
            self.enter(&dir)?;
            acc = self.accumulate_target(&component, acc)?;
            acc.invalidate();
            self.stack.pop();
        }
        transform::run_builtin_transformers(self, target, &mut acc)?;
        transform::run_transformer_configs(self, target, &mut acc)?;
        acc.invalidate();
        for var in &k.vars {
            if acc.vars.iter().any(|v| v.name == var.name) {
                return Err(Error::invalid(
                    &target.file,
                    "vars",
                    format!("var '{}' already encountered", var.name),
                ));
            }
            acc.vars.push(var.clone());
        }
        Ok(acc)
    }

    /// Whether origins are recorded.
    pub fn track_origins(&self) -> bool {
        self.track_origins
    }

    /// `path` relative to the directory being built, as kustomize writes origins.
    pub fn relative_to_root(&self, path: &Path) -> String {
        let path = normalize(path);
        let root: Vec<_> = self.root.components().collect();
        let target: Vec<_> = path.components().collect();
        let common = root.iter().zip(&target).take_while(|(a, b)| a == b).count();
        let mut relative = PathBuf::new();
        for _ in common..root.len() {
            relative.push("..");
        }
        for component in &target[common..] {
            relative.push(component.as_os_str());
        }
        relative.display().to_string()
    }

    /// The origin of objects made or touched by a builtin generator or transformer
    /// configured by a field of `target`: `configuredIn` and `configuredBy`, in kustomize's
    /// key order.
    pub fn configured_origin(&self, target: &Target, kind: &str) -> Value {
        let mut by = serde_json::Map::new();
        by.insert("apiVersion".into(), Value::String("builtin".into()));
        by.insert("kind".into(), Value::String(kind.to_owned()));
        let mut origin = serde_json::Map::new();
        origin.insert(
            "configuredIn".into(),
            Value::String(self.relative_to_root(&target.file)),
        );
        origin.insert("configuredBy".into(), Value::Object(by));
        Value::Object(origin)
    }

    /// Records that the builtin transformer `kind` of `target` ran over `resources` (when
    /// transformer annotations are asked for): objects without an origin take it as their
    /// origin, the others list it under their transformations, as kustomize does.
    pub fn record_transformer(&self, target: &Target, kind: &str, resources: &mut [Resource]) {
        if !self.track_transformations {
            return;
        }
        let origin = self.configured_origin(target, kind);
        for resource in resources {
            if resource.origin.is_none() {
                resource.origin = Some(origin.clone());
            } else {
                resource.transformations.push(origin.clone());
            }
        }
    }

    /// Reads the `openapi:` document of a kustomization (`path`; a `version` names the
    /// built-in schema, which is always there).
    fn load_openapi(&mut self, target: &Target) -> Result<(), Error> {
        let openapi = &target.kustomization.openapi;
        if let Some(unknown) = openapi.keys().find(|k| *k != "path" && *k != "version") {
            return Err(Error::invalid(
                &target.file,
                "openapi",
                format!("unknown field {unknown:?} (expected path or version)"),
            ));
        }
        let Some(path) = openapi.get("path") else {
            return Ok(());
        };
        let documents = self.read_field_documents(target, path, "openapi")?;
        let [document] = documents.as_slice() else {
            return Err(Error::invalid(
                &target.file,
                "openapi",
                format!("{path}: expected one document, found {}", documents.len()),
            ));
        };
        let schemas = Schemas::from_document(document)
            .map_err(|message| Error::transform(&target.file, "openapi", message.within(path)))?;
        self.schemas.extend(schemas);
        Ok(())
    }

    /// Builds a directory named by a `transformers:`/`generators:` entry into its objects
    /// (plugin configurations).
    pub fn build_subtree(&mut self, dir: &Path, field: &str) -> Result<Vec<Value>, Error> {
        self.enter(dir)?;
        let sub = self.load_target(dir, Some(field))?;
        let mut accumulator = self.accumulate_target(&sub, Accumulator::empty())?;
        self.stack.pop();
        transform::add_hash_suffixes(&mut accumulator.resources);
        transform::fix_name_references(&mut accumulator.resources, &accumulator.config)
            .map_err(|message| Error::transform(&sub.file, "nameReference", message))?;
        Ok(accumulator
            .resources
            .into_iter()
            .map(|r| r.object)
            .collect())
    }

    fn resolve_dir(&self, target: &Target, entry: &str, field: &str) -> Result<PathBuf, Error> {
        let path = self.confine(target, entry, field)?;
        if !self.fs.is_dir(&path) {
            return Err(Error::invalid(
                &target.file,
                field,
                format!("'{entry}': {} is not a directory", path.display()),
            ));
        }
        Ok(path)
    }

    fn enter(&mut self, dir: &Path) -> Result<(), Error> {
        if let Some(seen) = self.stack.iter().find(|seen| seen.starts_with(dir)) {
            let chain = self
                .stack
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" -> ");
            let _ = seen;
            return Err(Error::Cycle {
                path: dir.to_path_buf(),
                chain,
            });
        }
        self.stack.push(dir.to_path_buf());
        Ok(())
    }

    fn accumulate_resource(
        &mut self,
        target: &Target,
        entry: &str,
        field: &str,
        acc: &mut Accumulator,
    ) -> Result<(), Error> {
        if is_remote(entry) {
            return self.accumulate_remote(target, entry, field, acc);
        }
        let path = self.confine(target, entry, field)?;
        if self.fs.is_dir(&path) {
            self.enter(&path)?;
            let sub = self.load_target(&path, Some(field))?;
            if sub.kustomization.kind == "Component" {
                return Err(Error::invalid(
                    &target.file,
                    field,
                    format!("expected kind != 'Component' for path '{}'", path.display()),
                ));
            }
            let sub_acc = self.accumulate_target(&sub, Accumulator::empty())?;
            self.stack.pop();
            acc.merge(sub_acc, &format!("{field} '{entry}'"))
                .map_err(|message| Error::transform(&target.file, field, message))?;
            return Ok(());
        }
        let text = self.read_field_text(target, entry, field)?;
        let documents =
            crate::folded::parse_resource_documents(&text).map_err(|message| Error::Yaml {
                path: normalize(&target.dir.join(entry)),
                message: message.message,
            })?;
        for document in documents {
            for object in expand_lists(document) {
                if !object.is_object() {
                    return Err(Error::invalid(
                        &normalize(&target.dir.join(entry)),
                        field,
                        "document is not a mapping",
                    ));
                }
                let mut resource = Resource::new(object);
                if self.track_origins {
                    let path = self.relative_to_root(&target.dir.join(entry));
                    let mut origin = serde_json::Map::new();
                    origin.insert("path".into(), Value::String(path));
                    resource.origin = Some(Value::Object(origin));
                }
                acc.append(resource, &format!("merging resources from '{entry}'"))
                    .map_err(|message| Error::transform(&target.file, field, message))?;
            }
        }
        Ok(())
    }
}

impl Builder<'_> {
    /// Builds a remote base: the loader checks the repository out, and the kustomization
    /// directory inside it is built confined to that checkout (no file outside it is read,
    /// whatever its entries say), then merged like a local base.
    fn accumulate_remote(
        &mut self,
        target: &Target,
        entry: &str,
        field: &str,
        acc: &mut Accumulator,
    ) -> Result<(), Error> {
        let sub_acc = self.in_remote(target, entry, field, |sub, base| {
            if base.kustomization.kind == "Component" {
                return Err(Error::invalid(
                    &target.file,
                    field,
                    format!("expected kind != 'Component' for path '{entry}'"),
                ));
            }
            sub.accumulate_target(&base, Accumulator::empty())
        })?;
        acc.merge(sub_acc, &format!("{field} '{entry}'"))
            .map_err(|message| Error::transform(&target.file, field, message))
    }

    /// A remote `components:` entry, applied to `acc` as a local component is.
    fn accumulate_remote_component(
        &mut self,
        target: &Target,
        entry: &str,
        acc: Accumulator,
    ) -> Result<Accumulator, Error> {
        self.in_remote(target, entry, "components", |sub, component| {
            if component.kustomization.kind != "Component" {
                return Err(Error::invalid(
                    &component.file,
                    "kind",
                    format!(
                        "expected kind 'Component' for path '{entry}' but got '{}'",
                        component.kustomization.kind
                    ),
                ));
            }
            sub.accumulate_target(&component, acc)
        })
    }

    /// Fetches the remote `entry` with the loader and runs `run` on the kustomization of the
    /// directory it names, with a builder confined to the checkout; [`Error::Remote`] without
    /// a loader.
    fn in_remote<T>(
        &mut self,
        target: &Target,
        entry: &str,
        field: &str,
        run: impl FnOnce(&mut Builder<'_>, Target) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let fetch_error = |message: String| Error::RemoteFetch {
            path: target.file.clone(),
            field: field.to_owned(),
            url: entry.to_owned(),
            message,
        };
        let Some(loader) = self.options.remote.clone() else {
            return Err(Error::Remote {
                path: target.file.clone(),
                field: field.to_owned(),
                url: entry.to_owned(),
            });
        };
        let remote = parse_remote_target(entry)
            .map_err(|message| fetch_error(format!("not a remote target: {message}")))?;
        let checkout = loader.load(&remote).map_err(fetch_error)?;
        let checkout = absolute(&checkout);
        let dir = normalize(&checkout.join(&remote.path));
        let confined = Confined::new(&DiskFs, &checkout);
        if confined.resolve(&dir).is_none() || !confined.is_dir(&dir) {
            return Err(fetch_error(format!(
                "no directory {:?} in the repository",
                remote.path
            )));
        }
        let mut sub = Builder {
            fs: &confined,
            options: self.options,
            boundary: Some(&confined),
            schemas: std::mem::take(&mut self.schemas),
            root: self.root.clone(),
            track_origins: self.track_origins,
            track_transformations: self.track_transformations,
            stack: self.stack.clone(),
        };
        let result = sub.enter(&dir).and_then(|()| {
            let loaded = sub.load_target(&dir, Some(field))?;
            run(&mut sub, loaded)
        });
        self.schemas = std::mem::take(&mut sub.schemas);
        result
    }
}

/// Expands `kind: List` (and `*List`) documents into their items.
pub(crate) fn expand_lists(document: Value) -> Vec<Value> {
    let is_list = document
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|kind| kind.ends_with("List"))
        && document.get("items").is_some_and(Value::is_array);
    if is_list && let Value::Object(mut map) = document {
        if let Some(Value::Array(items)) = map.remove("items") {
            return items;
        }
        return Vec::new();
    }
    vec![document]
}

/// The fields of a kustomization file, as kustomize spells them.
const FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "openapi",
    "namePrefix",
    "nameSuffix",
    "namespace",
    "commonLabels",
    "labels",
    "commonAnnotations",
    "patchesStrategicMerge",
    "patchesJson6902",
    "patches",
    "images",
    "imageTags",
    "replacements",
    "replicas",
    "vars",
    "sortOptions",
    "resources",
    "components",
    "crds",
    "bases",
    "configMapGenerator",
    "secretGenerator",
    "helmGlobals",
    "helmCharts",
    "helmChartInflationGenerator",
    "generatorOptions",
    "configurations",
    "generators",
    "transformers",
    "validators",
    "buildMetadata",
];

/// Parses a kustomization file: Go's JSON field matching is case-insensitive, legacy
/// `patches` lists of strings mean `patchesStrategicMerge`, `imageTags` means `images`.
pub(crate) fn parse_kustomization(text: &str, file: &Path) -> Result<Kustomization, Error> {
    let documents = yaml::parse_documents(text).map_err(|message| Error::Yaml {
        path: file.to_path_buf(),
        message: message.message,
    })?;
    let document = match documents.len() {
        0 => Value::Object(serde_json::Map::new()),
        1 => documents.into_iter().next().unwrap_or_default(),
        _ => {
            return Err(Error::Kustomization {
                path: file.to_path_buf(),
                message: "more than one document in kustomization file".into(),
            });
        }
    };
    let Value::Object(map) = document else {
        return Err(Error::Kustomization {
            path: file.to_path_buf(),
            message: "kustomization must be a mapping".into(),
        });
    };
    let mut fixed = serde_json::Map::new();
    for (key, value) in map {
        let canonical = FIELDS
            .iter()
            .find(|f| f.eq_ignore_ascii_case(&key))
            .map_or(key.clone(), |f| (*f).to_owned());
        if value.is_null() {
            continue;
        }
        fixed.insert(canonical, value);
    }
    if let Some(Value::Array(patches)) = fixed.get("patches")
        && patches.iter().any(Value::is_string)
    {
        let patches = fixed.remove("patches").unwrap_or_default();
        fixed.insert("patchesStrategicMerge".into(), patches);
    }
    let mut kustomization: Kustomization =
        serde_json::from_value(Value::Object(fixed)).map_err(|error| Error::Kustomization {
            path: file.to_path_buf(),
            message: describe_serde_error(&error.to_string()),
        })?;
    crate::helm::fix_legacy(&mut kustomization);
    let image_tags = std::mem::take(&mut kustomization.image_tags);
    kustomization.images.extend(image_tags);
    match kustomization.kind.as_str() {
        "" | "Kustomization" | "Component" => {}
        other => {
            return Err(Error::Kustomization {
                path: file.to_path_buf(),
                message: format!(
                    "kind: unknown kind {other:?}, expected Kustomization or Component"
                ),
            });
        }
    }
    Ok(kustomization)
}

fn describe_serde_error(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((field, _)) = rest.split_once('`')
    {
        return format!("unknown field \"{field}\"");
    }
    message.to_owned()
}

/// Id of an object described by kind/name/namespace fields of a patch or selector.
pub(crate) fn id_of(object: &Value) -> ResId {
    Resource::new(object.clone()).current_id()
}

#[cfg(test)]
mod boundary_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{DiskFs, MemoryFs};

    fn run(files: &[(&str, &str)]) -> Result<Vec<Value>, Error> {
        let mut fs = MemoryFs::new();
        for (path, text) in files {
            fs.insert(path, *text);
        }
        build_with(&fs, Path::new("/app"), &BuildOptions::default())
    }

    const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\n";

    #[test]
    fn builds_from_memory_with_generator_hash() {
        let objects = run(&[
            (
                "app/kustomization.yaml",
                "resources: [cm.yaml]\nconfigMapGenerator:\n- name: gen\n  literals: [x=y]\n",
            ),
            ("app/cm.yaml", CM),
        ])
        .unwrap();
        assert_eq!(objects.len(), 2);
        assert!(
            objects
                .iter()
                .any(|o| o["metadata"]["name"].as_str().unwrap().starts_with("gen-"))
        );
    }

    #[test]
    fn bad_input_gives_errors_not_panics() {
        let malformed = run(&[
            ("app/kustomization.yaml", "resources: [cm.yaml]\n"),
            ("app/cm.yaml", "a: [b\n"),
        ])
        .unwrap_err();
        assert!(matches!(malformed, Error::Yaml { .. }), "{malformed}");
        let missing = run(&[("app/kustomization.yaml", "resources: [nope.yaml]\n")]).unwrap_err();
        assert!(missing.to_string().contains("nope.yaml"), "{missing}");
        let unknown = run(&[("app/kustomization.yaml", "notAField: 1\n")]).unwrap_err();
        assert!(
            unknown.to_string().contains("unknown field \"notAField\""),
            "{unknown}"
        );
        let helm = run(&[("app/kustomization.yaml", "helmCharts:\n- name: x\n")]).unwrap_err();
        assert!(
            helm.to_string().contains("must specify --enable-helm"),
            "{helm}"
        );
        let remote = run(&[(
            "app/kustomization.yaml",
            "resources:\n- https://github.com/x/y//z?ref=v1\n",
        )])
        .unwrap_err();
        assert!(matches!(remote, Error::Remote { .. }), "{remote}");
    }

    #[test]
    fn cycles_are_detected() {
        let error = run(&[
            ("app/kustomization.yaml", "resources: [../b]\n"),
            ("b/kustomization.yaml", "resources: [../app]\n"),
        ])
        .unwrap_err();
        assert!(matches!(error, Error::Cycle { .. }), "{error}");
    }

    #[test]
    fn files_outside_the_root_are_refused() {
        let error = run(&[
            ("app/kustomization.yaml", "resources: [../cm.yaml]\n"),
            ("cm.yaml", CM),
        ])
        .unwrap_err();
        assert!(matches!(error, Error::Restricted { .. }), "{error}");
        let mut fs = MemoryFs::new();
        fs.insert("app/kustomization.yaml", "resources: [../cm.yaml]\n");
        fs.insert("cm.yaml", CM);
        let options = BuildOptions {
            load_restrictor: LoadRestrictor::None,
            ..BuildOptions::default()
        };
        assert_eq!(
            build_with(&fs, Path::new("/app"), &options).unwrap().len(),
            1
        );
    }

    /// The message of a build that must fail, checked to name `file` and `field`.
    fn failure(files: &[(&str, &str)], file: &str, field: &str) -> String {
        let error = run(files).expect_err("the build must fail").to_string();
        assert!(error.contains(file), "{error:?} should name {file}");
        assert!(error.contains(field), "{error:?} should name {field}");
        error
    }

    #[test]
    fn malformed_yaml_names_the_file() {
        let message = failure(
            &[
                ("app/kustomization.yaml", "resources: [cm.yaml]\n"),
                ("app/cm.yaml", "metadata: {name: [x\n"),
            ],
            "/app/cm.yaml",
            "malformed yaml",
        );
        assert!(!message.is_empty());
        failure(
            &[("app/kustomization.yaml", "resources: [x\n")],
            "/app/kustomization.yaml",
            "malformed yaml",
        );
    }

    #[test]
    fn missing_resource_names_file_and_field() {
        failure(
            &[("app/kustomization.yaml", "resources: [nope.yaml]\n")],
            "/app/nope.yaml",
            "field resources of /app/kustomization.yaml",
        );
        failure(
            &[(
                "app/kustomization.yaml",
                "configMapGenerator:\n- name: x\n  files: [gone.txt]\n",
            )],
            "/app/gone.txt",
            "configMapGenerator",
        );
    }

    #[test]
    fn strategic_patch_matching_nothing_is_an_error() {
        let message = failure(
            &[
                (
                    "app/kustomization.yaml",
                    "resources: [cm.yaml]\npatches:\n- path: p.yaml\n",
                ),
                ("app/cm.yaml", CM),
                (
                    "app/p.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  a: c\n",
                ),
            ],
            "/app/kustomization.yaml",
            "patches",
        );
        assert!(message.contains("ConfigMap.v1.[noGrp]/other"), "{message}");
    }

    #[test]
    fn selector_matching_nothing_is_ignored_as_in_kustomize() {
        let objects = run(&[
            (
                "app/kustomization.yaml",
                "resources: [cm.yaml]\npatches:\n- target: {kind: Secret}\n  patch: '[{op: add, path: /x, value: 1}]'\n",
            ),
            ("app/cm.yaml", CM),
        ])
        .unwrap();
        assert_eq!(objects.len(), 1);
        assert!(objects[0].get("x").is_none());
    }

    #[test]
    fn cycle_names_the_chain() {
        let message = failure(
            &[
                ("app/kustomization.yaml", "resources: [../b]\n"),
                ("b/kustomization.yaml", "resources: [../app]\n"),
            ],
            "/app",
            "cycle detected",
        );
        assert!(message.contains("/b"), "{message}");
        failure(
            &[
                ("app/kustomization.yaml", "components: [../c]\n"),
                (
                    "c/kustomization.yaml",
                    "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncomponents: [../c]\n",
                ),
            ],
            "/c",
            "cycle detected",
        );
    }

    #[test]
    fn paths_escaping_the_root_are_refused() {
        for field in [
            "resources",
            "patchesStrategicMerge",
            "configurations",
            "crds",
        ] {
            let text = format!("{field}: [../outside.yaml]\n");
            failure(
                &[
                    ("app/kustomization.yaml", text.as_str()),
                    ("outside.yaml", CM),
                ],
                "/outside.yaml",
                &format!("field {field}"),
            );
        }
        failure(
            &[
                (
                    "app/kustomization.yaml",
                    "configMapGenerator:\n- name: x\n  files: [../../etc/passwd]\n",
                ),
                ("etc/passwd", "root"),
            ],
            "/etc/passwd",
            "field configMapGenerator",
        );
    }

    #[test]
    fn remote_bases_are_refused() {
        for entry in [
            "https://github.com/org/repo//deploy?ref=v1",
            "github.com/org/repo/deploy",
            "git@github.com:org/repo.git",
        ] {
            let text = format!("resources:\n- {entry}\n");
            let message = failure(
                &[("app/kustomization.yaml", text.as_str())],
                "/app/kustomization.yaml",
                "field resources",
            );
            assert!(message.contains("remote"), "{message}");
        }
    }

    #[test]
    fn symlinks_leaving_the_root_are_refused() {
        let scratch =
            std::env::temp_dir().join(format!("capstan-kustomize-symlink-{}", std::process::id()));
        let app = scratch.join("app");
        std::fs::create_dir_all(&app).unwrap();
        std::fs::write(scratch.join("secret.yaml"), CM).unwrap();
        std::fs::write(app.join("kustomization.yaml"), "resources: [link.yaml]\n").unwrap();
        let link = app.join("link.yaml");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(scratch.join("secret.yaml"), &link).unwrap();
        let result = build_with(&DiskFs, &app, &BuildOptions::default());
        std::fs::remove_dir_all(&scratch).unwrap();
        let error = result.expect_err("the link leaves the root");
        assert!(matches!(error, Error::Restricted { .. }), "{error}");
        let message = error.to_string();
        assert!(message.contains("link.yaml"), "{message}");
        assert!(message.contains("field resources"), "{message}");
    }

    #[test]
    fn custom_openapi_schema_merges_lists_by_key() {
        let schema = r#"{"definitions": {
            "v1.Thing": {"type": "object", "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Thing"}],
                "properties": {"spec": {"type": "object", "properties": {"items": {"type": "array",
                    "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge",
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "size": {"type": "integer"}}}}}}}}}}"#;
        let thing = "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: t\nspec:\n  items:\n  - name: a\n    size: 1\n";
        let patch = "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: t\nspec:\n  items:\n  - name: b\n    size: 2\n";
        let names = |objects: &[Value]| -> Vec<String> {
            objects[0]["spec"]["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["name"].as_str().unwrap().to_owned())
                .collect()
        };
        let with = run(&[
            (
                "app/kustomization.yaml",
                "resources: [t.yaml]\nopenapi:\n  path: schema.json\npatches:\n- path: p.yaml\n",
            ),
            ("app/t.yaml", thing),
            ("app/p.yaml", patch),
            ("app/schema.json", schema),
        ])
        .unwrap();
        assert_eq!(names(&with), ["b", "a"]);
        let without = run(&[
            (
                "app/kustomization.yaml",
                "resources: [t.yaml]\npatches:\n- path: p.yaml\n",
            ),
            ("app/t.yaml", thing),
            ("app/p.yaml", patch),
        ])
        .unwrap();
        assert_eq!(names(&without), ["b"]);
        failure(
            &[
                ("app/kustomization.yaml", "openapi:\n  path: s.json\n"),
                ("app/s.json", "{\"swagger\": \"2.0\"}"),
            ],
            "/app/kustomization.yaml",
            "openapi",
        );
    }

    #[test]
    fn build_metadata_annotations_use_relative_paths_in_kustomize_order() {
        let objects = run(&[
            (
                "app/kustomization.yaml",
                "buildMetadata: [originAnnotations, transformerAnnotations]\nresources: [base]\nnamespace: n\n",
            ),
            ("app/base/kustomization.yaml", "resources: [cm.yaml]\n"),
            ("app/base/cm.yaml", CM),
        ])
        .unwrap();
        let annotations = &objects[0]["metadata"]["annotations"];
        assert_eq!(
            annotations["config.kubernetes.io/origin"],
            "path: base/cm.yaml\n"
        );
        assert_eq!(
            annotations["alpha.config.kubernetes.io/transformations"],
            "- configuredIn: kustomization.yaml\n  configuredBy:\n    apiVersion: builtin\n    kind: NamespaceTransformer\n"
        );
    }

    #[test]
    fn transformer_failures_keep_their_causes() {
        use std::error::Error as _;
        let error = run(&[
            (
                "app/kustomization.yaml",
                "resources: [cm.yaml]\npatches:\n- target: {name: '(x'}\n  patch: '[{op: add, path: /x, value: 1}]'\n",
            ),
            ("app/cm.yaml", CM),
        ])
        .unwrap_err();
        let Error::Transform { field, source, .. } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(field, "patches");
        assert!(
            matches!(**source, crate::error::TransformError::Regex { .. }),
            "{source:?}"
        );
        let regex = source.source().expect("the regex error is the cause");
        assert!(error.to_string().ends_with(&regex.to_string()), "{error}");
        let patch = run(&[
            (
                "app/kustomization.yaml",
                "resources: [cm.yaml]\npatches:\n- target: {kind: ConfigMap}\n  patch: '[{op: remove, path: /nope}]'\n",
            ),
            ("app/cm.yaml", CM),
        ])
        .unwrap_err();
        let cause = patch.source().and_then(|s| s.source());
        assert!(
            cause.is_some_and(<dyn std::error::Error>::is::<capstan_patch::PatchError>),
            "{patch:?}"
        );
        assert!(
            patch
                .to_string()
                .starts_with("/app/kustomization.yaml: patches: applying json patch to"),
            "{patch}"
        );
    }

    #[test]
    fn legacy_patches_list_means_strategic_merge() {
        let k = parse_kustomization(
            "patches:\n- p.yaml\nimageTags:\n- name: x\n  newTag: y\n",
            Path::new("k.yaml"),
        )
        .unwrap();
        assert_eq!(k.patches_strategic_merge, ["p.yaml"]);
        assert_eq!(k.images[0].new_tag, "y");
    }

    /// Resources whose `metadata.annotations` is null or empty, with
    /// null/empty labels and template metadata beside them.
    const EMPTY_METADATA: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n  annotations:\n  labels:\nspec:\n  template:\n    metadata:\n      annotations:\n      labels:\n    spec:\n      containers: []\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  annotations: {}\n  labels: {}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: d\n  annotations:\n    x: y\n  labels:\nspec:\n  template:\n    metadata:\n      annotations: {}\n";

    #[test]
    fn empty_annotations_are_dropped_like_kubectl() {
        // Expected outputs are `kubectl kustomize` (kustomize v5.5.0):
        // top-level annotations that are null or {} disappear, labels and
        // nested template metadata stay as written.
        let build = |kustomization: &str| {
            let objects = run(&[
                ("app/kustomization.yaml", kustomization),
                ("app/r.yaml", EMPTY_METADATA),
            ])
            .unwrap();
            crate::yaml::to_yaml(&objects)
        };
        assert_eq!(
            build("resources: [r.yaml]\n"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {}\n  name: b\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n---\napiVersion: v1\nkind: Service\nmetadata:\n  annotations:\n    x: \"y\"\n  labels: null\n  name: d\nspec:\n  template:\n    metadata:\n      annotations: {}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  labels: null\n  name: a\nspec:\n  template:\n    metadata:\n      annotations: null\n      labels: null\n    spec:\n      containers: []\n"
        );
        assert_eq!(
            build("resources: [r.yaml]\nnamePrefix: p-\n"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {}\n  name: p-b\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p-c\n---\napiVersion: v1\nkind: Service\nmetadata:\n  annotations:\n    x: \"y\"\n  labels: null\n  name: p-d\nspec:\n  template:\n    metadata:\n      annotations: {}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  labels: null\n  name: p-a\nspec:\n  template:\n    metadata:\n      annotations: null\n      labels: null\n    spec:\n      containers: []\n"
        );
        assert_eq!(
            build("resources: [r.yaml]\ncommonAnnotations: {k: v}\n"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    k: v\n  labels: {}\n  name: b\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    k: v\n  name: c\n---\napiVersion: v1\nkind: Service\nmetadata:\n  annotations:\n    k: v\n    x: \"y\"\n  labels: null\n  name: d\nspec:\n  template:\n    metadata:\n      annotations: {}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  annotations:\n    k: v\n  labels: null\n  name: a\nspec:\n  template:\n    metadata:\n      annotations:\n        k: v\n      labels: null\n    spec:\n      containers: []\n"
        );
        assert_eq!(
            build("resources: [r.yaml]\nnamespace: ns1\n"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {}\n  name: b\n  namespace: ns1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: ns1\n---\napiVersion: v1\nkind: Service\nmetadata:\n  annotations:\n    x: \"y\"\n  labels: null\n  name: d\n  namespace: ns1\nspec:\n  template:\n    metadata:\n      annotations: {}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  labels: null\n  name: a\n  namespace: ns1\nspec:\n  template:\n    metadata:\n      annotations: null\n      labels: null\n    spec:\n      containers: []\n"
        );
    }

    #[test]
    fn annotations_emptied_by_patches_are_dropped_like_kubectl() {
        let objects = run(&[
            ("app/kustomization.yaml", "resources: [r.yaml]\npatches:\n- target: {name: b}\n  patch: |\n    - op: add\n      path: /metadata/annotations\n      value: {}\n- target: {name: c}\n  patch: |\n    apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: c\n      annotations: {}\n- target: {name: e}\n  patch: |\n    - op: remove\n      path: /metadata/annotations/z\n"),
            ("app/r.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e\n  annotations:\n    z: z\n"),
        ])
        .unwrap();
        assert_eq!(
            crate::yaml::to_yaml(&objects),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e\n"
        );
    }
}
