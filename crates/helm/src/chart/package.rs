//! Packaging a chart as `helm package` does (Helm's `chartutil.Save`): `<name>-<version>.tgz`
//! with every entry under `<name>/`.
//!
//! What goes in, in Helm's order: `Chart.yaml` written again from the loaded metadata (keys
//! sorted, only the fields Helm knows, as `sigs.k8s.io/yaml` marshals them), `Chart.lock`
//! (apiVersion v2) written again the same way, `values.yaml` byte for byte as read,
//! `values.schema.json`, the templates, the other files (`crds/`, `README.md`, …; for
//! apiVersion v1 charts also `requirements.yaml`/`requirements.lock`), then each subchart of
//! `charts/` — a directory or a `.tgz` archive alike — written out as files under
//! `<name>/charts/<subchart name>/`. `.helmignore` is honoured when reading a directory.
//!
//! Every entry has mode `0644`, no owner, and the modification time of its source file
//! rounded to the second (Go's `tar.Writer` rounds); `Chart.yaml` takes the time of
//! `Chart.yaml`, `Chart.lock` its `generated` time. The gzip header carries Helm's extra field
//! and comment (`Helm`) and no time. So the same tree with the same times gives the same
//! bytes; [`Options::source_date_epoch`] stamps one time on every entry (Helm's
//! `SOURCE_DATE_EPOCH`).
//!
//! Expected flow: [`package`] a directory, or [`read_dir`] it, change or add files (merged
//! values, built dependencies under `charts/`) and [`package_files`]; then
//! [`Package::write_to`] a directory. [`metadata_json`] is the chart's metadata as Helm's
//! `json.Marshal` writes it (the config blob of an OCI chart).
//!
//! Errors are Helm's where Helm reports the same problem (a missing `Chart.yaml`, an invalid
//! version, dependencies missing from `charts/`).

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::load::{MAX_CHART_SIZE, MAX_FILE_SIZE};
use super::{Error, File, Metadata};

/// How deep subcharts may nest when they are written out.
const MAX_NESTING: usize = 32;
/// The gzip extra field Helm v4.2.3 writes into every chart archive.
const GZIP_EXTRA: &[u8] = b"+aHR0cHM6Ly95b3V0dS5iZS96OVV6MWljandyTQo=";

/// A file of a chart directory about to be packaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartFile {
    /// Path relative to the chart root, `/`-separated (`templates/deployment.yaml`).
    pub name: String,
    /// Contents (a leading UTF-8 byte order mark is dropped, as Helm's loader does).
    pub data: Vec<u8>,
    /// Modification time, Unix seconds; `None` takes the packaging time (as Helm does for a
    /// file without one) or [`Options::source_date_epoch`].
    pub modified: Option<i64>,
}

/// `helm package` flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `--version`: the chart version written (must be SemVer).
    pub version: Option<String>,
    /// `--app-version`.
    pub app_version: Option<String>,
    /// One modification time (Unix seconds) for every entry, for reproducible archives.
    pub source_date_epoch: Option<i64>,
}

/// A packaged chart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// `<name>-<version>.tgz`.
    pub file_name: String,
    /// The archive.
    pub bytes: Vec<u8>,
    /// The chart name.
    pub name: String,
    /// The chart version (after [`Options::version`]).
    pub version: String,
}

impl Package {
    /// Writes the archive as `<dir>/<file_name>` (creating `dir`), replacing any file of that
    /// name atomically; returns its path.
    ///
    /// # Errors
    ///
    /// When `dir` is not a directory or cannot be written.
    pub fn write_to(&self, dir: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(&self.file_name);
        let mut temp = tempfile_in(dir)?;
        temp.1.write_all(&self.bytes)?;
        temp.1.sync_all()?;
        drop(temp.1);
        std::fs::rename(&temp.0, &path).inspect_err(|_| {
            let _ = std::fs::remove_file(&temp.0);
        })?;
        Ok(path)
    }
}

/// A new file beside the target (`.<pid>-<n>.tmp`), for an atomic rename.
fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    for n in 0..100u32 {
        let path = dir.join(format!(".package-{}-{n}.tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free temporary file name"))
}

/// `helm package DIR`: the chart directory packaged as it stands.
///
/// # Errors
///
/// What loading the chart reports, or an unreadable file.
pub fn package(chart_dir: &Path) -> Result<Package, Error> {
    package_with(chart_dir, &Options::default())
}

/// `helm package DIR --version … --app-version …`.
///
/// # Errors
///
/// What loading the chart reports, an invalid `--version`, dependencies listed in
/// `Chart.yaml` but missing from `charts/`.
pub fn package_with(chart_dir: &Path, options: &Options) -> Result<Package, Error> {
    package_files(read_dir(chart_dir)?, options)
}

/// The files of a chart directory that Helm's loader reads, in its walk order, with their
/// modification times: `.helmignore` honoured, links followed but kept inside the chart,
/// irregular files refused, sizes capped as [`super::load`] caps them.
///
/// # Errors
///
/// An unreadable directory or file, a bad `.helmignore` rule, a link leaving the chart, a
/// file or chart over the size caps.
pub fn read_dir(chart_dir: &Path) -> Result<Vec<ChartFile>, Error> {
    let walk = super::load::Walk::run(chart_dir)?;
    Ok(walk
        .files
        .into_iter()
        .zip(walk.modified)
        .map(|(file, modified)| ChartFile {
            name: file.name,
            data: file.data,
            modified: modified.map(go_round_seconds),
        })
        .collect())
}

/// A file time as Go's `tar.Writer` stores it: rounded to the nearest second.
fn go_round_seconds(time: std::time::SystemTime) -> i64 {
    let (seconds, nanos) = match time.duration_since(std::time::UNIX_EPOCH) {
        Ok(after) => (
            i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
            after.subsec_nanos(),
        ),
        Err(before) => {
            let before = before.duration();
            let mut seconds = -i64::try_from(before.as_secs()).unwrap_or(i64::MAX);
            let mut nanos = before.subsec_nanos();
            if nanos > 0 {
                seconds -= 1;
                nanos = 1_000_000_000 - nanos;
            }
            (seconds, nanos)
        }
    };
    if nanos >= 500_000_000 {
        seconds + 1
    } else {
        seconds
    }
}

/// Packages the files of a chart directory (as [`read_dir`] returns them, possibly changed:
/// merged values, subcharts added under `charts/`) as `helm package` would package that
/// directory.
///
/// # Errors
///
/// What loading the chart reports (Helm's words), an invalid `--version`, dependencies listed
/// in `Chart.yaml` but missing from `charts/`.
pub fn package_files(mut files: Vec<ChartFile>, options: &Options) -> Result<Package, Error> {
    for file in &mut files {
        if file.data.starts_with(b"\xef\xbb\xbf") {
            file.data.drain(..3);
        }
    }
    // The loader is the judge of what is a chart: the same errors as `helm package`.
    let loaded = super::load_dir_files(
        files
            .iter()
            .map(|f| File {
                name: f.name.clone(),
                data: f.data.clone(),
            })
            .collect(),
    )?;
    let mut metadata = loaded.metadata.clone();
    if let Some(version) = &options.version {
        metadata.version.clone_from(version);
    }
    if capstan_semver::parse_version(&metadata.version).is_none() {
        // Masterminds' `ErrInvalidSemVer`, which `helm package` prints as it is.
        return Err(Error::new("invalid semantic version"));
    }
    if let Some(app_version) = &options.app_version {
        metadata.app_version.clone_from(app_version);
    }
    if !metadata.dependencies.is_empty() {
        super::check_dependencies(&loaded)?;
    }
    let now = options
        .source_date_epoch
        .unwrap_or_else(|| jiff::Timestamp::now().as_second());
    let mut writer = Writer {
        tar: tar::Builder::new(Vec::new()),
        stamp: options.source_date_epoch,
        now,
    };
    writer.chart(files, Some(&metadata), "", 0)?;
    let tar = writer
        .tar
        .into_inner()
        .map_err(|e| Error::new(format!("writing the chart archive: {e}")))?;
    let mut gz = flate2::GzBuilder::new()
        .extra(GZIP_EXTRA)
        .comment("Helm")
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar)
        .and_then(|()| gz.try_finish())
        .map_err(|e| Error::new(format!("writing the chart archive: {e}")))?;
    let bytes = gz
        .finish()
        .map_err(|e| Error::new(format!("writing the chart archive: {e}")))?;
    Ok(Package {
        file_name: format!("{}-{}.tgz", metadata.name, metadata.version),
        bytes,
        name: metadata.name,
        version: metadata.version,
    })
}

struct Writer {
    tar: tar::Builder<Vec<u8>>,
    stamp: Option<i64>,
    now: i64,
}

/// A chart's files sorted as Helm's `LoadFiles` sorts them.
#[derive(Default)]
struct Sorted {
    chart_yaml: Option<ChartFile>,
    lock: Option<ChartFile>,
    values: Option<ChartFile>,
    schema: Option<ChartFile>,
    templates: Vec<ChartFile>,
    files: Vec<ChartFile>,
    v1_files: Vec<ChartFile>,
    subcharts: std::collections::BTreeMap<String, Vec<ChartFile>>,
}

fn sort_files(files: Vec<ChartFile>) -> Sorted {
    let mut sorted = Sorted::default();
    for file in files {
        match file.name.as_str() {
            "Chart.yaml" => sorted.chart_yaml = Some(file),
            "Chart.lock" => sorted.lock = Some(file),
            "values.yaml" => sorted.values = Some(file),
            "values.schema.json" => sorted.schema = Some(file),
            "requirements.yaml" | "requirements.lock" => sorted.v1_files.push(file),
            name if name.starts_with("templates/") => sorted.templates.push(file),
            name if name.starts_with("charts/")
                && Path::new(name).extension().is_none_or(|e| e != "prov") =>
            {
                let inner = name["charts/".len()..].to_owned();
                let (sub, rest) = match inner.split_once('/') {
                    Some((sub, rest)) => (sub.to_owned(), rest.to_owned()),
                    None => (inner.clone(), inner),
                };
                sorted.subcharts.entry(sub).or_default().push(ChartFile {
                    name: rest,
                    data: file.data,
                    modified: file.modified,
                });
            }
            _ => sorted.files.push(file),
        }
    }
    sorted
}

impl Writer {
    /// Writes one chart under `<prefix><name>/`; `metadata` overrides the chart's own (the
    /// top chart's `--version`/`--app-version`).
    fn chart(
        &mut self,
        files: Vec<ChartFile>,
        metadata: Option<&Metadata>,
        prefix: &str,
        depth: usize,
    ) -> Result<(), Error> {
        if depth > MAX_NESTING {
            return Err(Error::new("subcharts nest too deep"));
        }
        let sorted = sort_files(files);
        let Some(chart_yaml) = &sorted.chart_yaml else {
            return Err(Error::new("Chart.yaml file is missing"));
        };
        let parsed;
        let metadata = if let Some(metadata) = metadata {
            metadata
        } else {
            parsed = super::metadata::parse_chart_yaml(&chart_yaml.data)?;
            &parsed
        };
        let v1 = metadata.api_version == "v1";
        let base = format!("{prefix}{}", metadata.name);
        let mut chart_metadata = metadata.clone();
        if v1 {
            chart_metadata.dependencies.clear();
        }
        let yaml = metadata_yaml(&chart_metadata)?;
        self.entry(&format!("{base}/Chart.yaml"), &yaml, chart_yaml.modified)?;
        if !v1 && let Some(lock) = &sorted.lock {
            let (data, generated) = lock_yaml(&lock.data)?;
            self.entry(&format!("{base}/Chart.lock"), &data, generated)?;
        }
        if let Some(values) = &sorted.values {
            self.entry(
                &format!("{base}/values.yaml"),
                &values.data,
                values.modified,
            )?;
        }
        if let Some(schema) = &sorted.schema {
            if serde_json::from_slice::<serde::de::IgnoredAny>(&schema.data).is_err() {
                return Err(Error::new("invalid JSON in values.schema.json"));
            }
            self.entry(
                &format!("{base}/values.schema.json"),
                &schema.data,
                schema.modified,
            )?;
        }
        let v1_files = if v1 { sorted.v1_files } else { Vec::new() };
        for file in sorted
            .templates
            .iter()
            .chain(&sorted.files)
            .chain(&v1_files)
        {
            self.entry(&format!("{base}/{}", file.name), &file.data, file.modified)?;
        }
        for (name, files) in sorted.subcharts {
            if name.starts_with('_') || name.starts_with('.') {
                continue;
            }
            let prefix = format!("{base}/charts/");
            if Path::new(&name)
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("tgz"))
            {
                let [archive] = files.as_slice() else {
                    continue;
                };
                let files = archive_files(&archive.data)?;
                self.chart(files, None, &prefix, depth + 1)?;
            } else {
                // A lone file directly under charts/ is no chart.
                let files: Vec<ChartFile> = files.into_iter().filter(|f| f.name != name).collect();
                if files.is_empty() {
                    continue;
                }
                self.chart(files, None, &prefix, depth + 1)?;
            }
        }
        Ok(())
    }

    /// Appends one file as Go's `tar.Writer` writes a USTAR header: mode `0644`, no owner,
    /// device numbers written as zeros, and the checksum as six octal digits, NUL, space.
    fn entry(&mut self, name: &str, data: &[u8], modified: Option<i64>) -> Result<(), Error> {
        let failed =
            |e: std::io::Error| Error::new(format!("writing {name} to the chart archive: {e}"));
        let mtime = self.stamp.or(modified).unwrap_or(self.now);
        let mut header = tar::Header::new_ustar();
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        header.set_size(data.len() as u64);
        header.set_mtime(u64::try_from(mtime).unwrap_or(0));
        header.set_entry_type(tar::EntryType::Regular);
        header.set_device_major(0).map_err(failed)?;
        header.set_device_minor(0).map_err(failed)?;
        if header.set_path(name).is_err() {
            // Longer than USTAR holds: the tar crate's long-name record (Go would write PAX).
            return self
                .tar
                .append_data(&mut header, name, data)
                .map_err(failed);
        }
        let bytes = header.as_mut_bytes();
        bytes[148..156].fill(b' ');
        let sum: u32 = bytes.iter().map(|&b| u32::from(b)).sum();
        bytes[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        self.tar.append(&header, data).map_err(failed)
    }
}

/// The files of a subchart archive (already checked by the loader), their top directory
/// dropped, with the archive's times.
fn archive_files(bytes: &[u8]) -> Result<Vec<ChartFile>, Error> {
    let failed = |e: std::io::Error| Error::new(format!("reading a subchart archive: {e}"));
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut files = Vec::new();
    let mut total = 0u64;
    for entry in archive.entries().map_err(failed)? {
        let mut entry = entry.map_err(failed)?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some((_, rest)) = path.split_once('/') else {
            continue;
        };
        let name = rest
            .split('/')
            .filter(|part| !part.is_empty() && *part != ".")
            .collect::<Vec<_>>()
            .join("/");
        if name.is_empty() || name.split('/').any(|part| part == "..") {
            return Err(Error::new(format!(
                "chart illegally references parent directory: {path:?}"
            )));
        }
        let modified = entry
            .header()
            .mtime()
            .ok()
            .and_then(|t| i64::try_from(t).ok());
        let mut data = Vec::new();
        (&mut entry)
            .take(MAX_FILE_SIZE + 1)
            .read_to_end(&mut data)
            .map_err(failed)?;
        total += data.len() as u64;
        if data.len() as u64 > MAX_FILE_SIZE || total > MAX_CHART_SIZE {
            return Err(Error::new(format!(
                "decompressed chart file {path:?} is larger than the maximum size"
            )));
        }
        if data.starts_with(b"\xef\xbb\xbf") {
            data.drain(..3);
        }
        files.push(ChartFile {
            name,
            data,
            modified,
        });
    }
    Ok(files)
}

/// Helm's `chart.Dependency` as `encoding/json` writes it (Go's field order and `omitempty`).
#[derive(Serialize)]
struct GoDependency<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    version: &'a str,
    repository: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    condition: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tags: &'a [String],
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    enabled: bool,
    #[serde(rename = "import-values", skip_serializing_if = "<[_]>::is_empty")]
    import_values: &'a [serde_json::Value],
    #[serde(skip_serializing_if = "str::is_empty")]
    alias: &'a str,
}

impl<'a> GoDependency<'a> {
    fn of(dep: &'a super::Dependency) -> Self {
        GoDependency {
            name: &dep.name,
            version: &dep.version,
            repository: &dep.repository,
            condition: &dep.condition,
            tags: &dep.tags,
            enabled: dep.enabled,
            import_values: &dep.import_values,
            alias: &dep.alias,
        }
    }
}

/// Helm's `chart.Maintainer`.
#[derive(Serialize)]
struct GoMaintainer {
    #[serde(skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    email: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    url: String,
}

/// Helm's `chart.Metadata` as `encoding/json` writes it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GoMetadata<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "String::is_empty")]
    home: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    sources: Vec<String>,
    #[serde(skip_serializing_if = "str::is_empty")]
    version: &'a str,
    #[serde(skip_serializing_if = "String::is_empty")]
    description: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    keywords: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    maintainers: Vec<GoMaintainer>,
    #[serde(skip_serializing_if = "String::is_empty")]
    icon: String,
    #[serde(rename = "apiVersion", skip_serializing_if = "str::is_empty")]
    api_version: &'a str,
    #[serde(skip_serializing_if = "String::is_empty")]
    condition: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    tags: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    app_version: &'a str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    deprecated: bool,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    annotations: std::collections::BTreeMap<String, String>,
    #[serde(skip_serializing_if = "str::is_empty")]
    kube_version: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dependencies: Vec<GoDependency<'a>>,
    #[serde(rename = "type", skip_serializing_if = "str::is_empty")]
    chart_type: &'a str,
}

fn json_string(value: Option<&serde_json::Value>) -> String {
    match value {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        Some(serde_json::Value::Bool(b)) => b.to_string(),
        _ => String::new(),
    }
}

fn json_strings(value: Option<&serde_json::Value>) -> Vec<String> {
    match value {
        Some(serde_json::Value::Array(items)) => {
            items.iter().map(|item| json_string(Some(item))).collect()
        }
        _ => Vec::new(),
    }
}

fn go_metadata(metadata: &Metadata) -> GoMetadata<'_> {
    let extra = |key: &str| metadata.extra.get(key);
    let maintainers = match extra("maintainers") {
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|item| GoMaintainer {
                name: json_string(item.get("name")),
                email: json_string(item.get("email")),
                url: json_string(item.get("url")),
            })
            .collect(),
        _ => Vec::new(),
    };
    let annotations = match extra("annotations") {
        Some(serde_json::Value::Object(entries)) => entries
            .iter()
            .map(|(k, v)| (k.clone(), json_string(Some(v))))
            .collect(),
        _ => std::collections::BTreeMap::new(),
    };
    GoMetadata {
        name: &metadata.name,
        home: json_string(extra("home")),
        sources: json_strings(extra("sources")),
        version: &metadata.version,
        description: json_string(extra("description")),
        keywords: json_strings(extra("keywords")),
        maintainers,
        icon: json_string(extra("icon")),
        api_version: &metadata.api_version,
        condition: json_string(extra("condition")),
        tags: json_string(extra("tags")),
        app_version: &metadata.app_version,
        deprecated: matches!(extra("deprecated"), Some(serde_json::Value::Bool(true))),
        annotations,
        kube_version: &metadata.kube_version,
        dependencies: metadata.dependencies.iter().map(GoDependency::of).collect(),
        chart_type: &metadata.chart_type,
    }
}

/// Go's `encoding/json` escapes `<`, `>`, `&`, U+2028 and U+2029 inside strings; they can
/// only appear inside strings in JSON text.
fn go_json_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The chart's metadata as Helm's `json.Marshal(chart.Metadata)` writes it: Go's field order,
/// empty fields left out. It is the config blob of a Helm OCI chart.
pub fn metadata_json(metadata: &Metadata) -> Vec<u8> {
    let json = serde_json::to_string(&go_metadata(metadata)).expect("metadata serializes");
    go_json_escape(&json).into_bytes()
}

/// `Chart.yaml` as Helm's `chartutil.Save` writes it (`sigs.k8s.io/yaml.Marshal` of the
/// metadata: keys sorted).
fn metadata_yaml(metadata: &Metadata) -> Result<Vec<u8>, Error> {
    let json = serde_json::to_value(go_metadata(metadata)).expect("metadata serializes");
    crate::yaml::to_yaml(&crate::Value::from_json(&json))
        .map(String::into_bytes)
        .map_err(|e| Error::new(format!("writing Chart.yaml: {e}")))
}

/// `Chart.lock` as Helm writes it again (its known fields, keys sorted), and its `generated`
/// time (the entry's time in the archive).
fn lock_yaml(data: &[u8]) -> Result<(Vec<u8>, Option<i64>), Error> {
    let text = String::from_utf8_lossy(data);
    let lock = crate::yaml::parse(&text)
        .map_err(|e| Error::new(format!("cannot load Chart.lock: {e}")))?;
    let generated = json_string(lock.get("generated"));
    let time = if generated.is_empty() {
        None
    } else {
        let time = generated
            .parse::<jiff::Timestamp>()
            .map_err(|e| Error::new(format!("cannot load Chart.lock: generated: {e}")))?;
        // Go's tar writer rounds to the nearest second.
        Some(time.as_second() + i64::from(time.subsec_nanosecond() >= 500_000_000))
    };
    let dependencies = super::metadata::parse_requirements(data)?;
    let dependencies: Vec<GoDependency<'_>> = dependencies.iter().map(GoDependency::of).collect();
    let json = serde_json::json!({
        "generated": if generated.is_empty() { "0001-01-01T00:00:00Z".to_owned() } else { generated },
        "digest": json_string(lock.get("digest")),
        "dependencies": if dependencies.is_empty() { serde_json::Value::Null } else { serde_json::to_value(&dependencies).expect("serializes") },
    });
    let yaml = crate::yaml::to_yaml(&crate::Value::from_json(&json))
        .map_err(|e| Error::new(format!("writing Chart.lock: {e}")))?;
    Ok((yaml.into_bytes(), time))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, data: &str, modified: i64) -> ChartFile {
        ChartFile {
            name: name.to_owned(),
            data: data.as_bytes().to_vec(),
            modified: Some(modified),
        }
    }

    fn entries(bytes: &[u8]) -> Vec<(String, String, u64)> {
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
        archive
            .entries()
            .expect("entries")
            .map(|entry| {
                let mut entry = entry.expect("entry");
                let name = entry.path().expect("path").display().to_string();
                let mtime = entry.header().mtime().expect("mtime");
                let mut text = String::new();
                entry.read_to_string(&mut text).expect("text");
                (name, text, mtime)
            })
            .collect()
    }

    fn chart() -> Vec<ChartFile> {
        vec![
            file(
                "Chart.yaml",
                "name: app\nversion: 1.0.0\napiVersion: v2\nunknown: dropped\ndescription: An <app>\n",
                100,
            ),
            file("README.md", "read me\n", 200),
            file("templates/cm.yaml", "kind: ConfigMap\n", 300),
            file("values.yaml", "# kept as written\nreplicas: 1\n", 400),
            file(
                "charts/sub/Chart.yaml",
                "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
                500,
            ),
            file("charts/sub/templates/x.yaml", "x: 1\n", 600),
        ]
    }

    #[test]
    fn writes_helm_order_names_times_and_sorted_chart_yaml() {
        let packaged = package_files(chart(), &Options::default()).expect("packages");
        assert_eq!(packaged.file_name, "app-1.0.0.tgz");
        let entries = entries(&packaged.bytes);
        let names: Vec<&str> = entries.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "app/Chart.yaml",
                "app/values.yaml",
                "app/templates/cm.yaml",
                "app/README.md",
                "app/charts/sub/Chart.yaml",
                "app/charts/sub/templates/x.yaml",
            ]
        );
        assert_eq!(
            entries[0].1,
            "apiVersion: v2\ndescription: An <app>\nname: app\nversion: 1.0.0\n"
        );
        assert_eq!(entries[1].1, "# kept as written\nreplicas: 1\n");
        assert_eq!(entries[0].2, 100);
        assert_eq!(entries[5].2, 600);
    }

    #[test]
    fn same_files_same_bytes_and_flags_override() {
        let options = Options {
            version: Some("2.0.0+build.1".to_owned()),
            app_version: Some("v9".to_owned()),
            source_date_epoch: Some(42),
        };
        let first = package_files(chart(), &options).expect("packages");
        let second = package_files(chart(), &options).expect("packages");
        assert_eq!(first.bytes, second.bytes);
        assert_eq!(first.file_name, "app-2.0.0+build.1.tgz");
        let entries = entries(&first.bytes);
        assert!(
            entries[0].1.contains("appVersion: v9\n"),
            "{}",
            entries[0].1
        );
        assert!(entries.iter().all(|(_, _, mtime)| *mtime == 42));
        let chart = crate::chart::load_archive(&first.bytes).expect("loads back");
        assert_eq!(chart.metadata.version, "2.0.0+build.1");
        assert_eq!(chart.dependencies.len(), 1);
    }

    #[test]
    fn refuses_what_helm_refuses() {
        let bad_version = Options {
            version: Some("not-a-version".to_owned()),
            ..Options::default()
        };
        let err = package_files(chart(), &bad_version).expect_err("bad version");
        assert_eq!(err.message, "invalid semantic version");
        let mut missing = chart();
        missing[0] = file(
            "Chart.yaml",
            "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: db\n  version: 1.x\n  repository: https://example.com\n",
            1,
        );
        let err = package_files(missing, &Options::default()).expect_err("missing dependency");
        assert!(
            err.message.contains("missing in charts/ directory: db"),
            "{}",
            err.message
        );
        let err = package_files(vec![file("values.yaml", "a: 1\n", 1)], &Options::default())
            .expect_err("no Chart.yaml");
        assert!(
            err.message.contains("Chart.yaml file is missing"),
            "{}",
            err.message
        );
    }
}
