//! Loading charts from directories and `.tgz` archives, as Helm's loader does.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::ignore::Rules;
use super::{Chart, Error, File, metadata};

/// The most an archive may hold once decompressed (Helm v4's `MaxDecompressedChartSize`).
pub const MAX_CHART_SIZE: u64 = 100 * 1024 * 1024;
/// The most one file of a chart may hold (Helm v4's `MaxDecompressedFileSize`).
pub const MAX_FILE_SIZE: u64 = 5 * 1024 * 1024;
/// How deep subcharts may nest (charts inside charts inside …) before loading gives up.
const MAX_NESTING: usize = 32;
/// How many entries a directory walk may visit (a guard against link loops and huge trees).
const MAX_DIR_ENTRIES: usize = 100_000;

const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// Loads a chart from a directory or a `.tgz` archive.
pub fn load(path: impl AsRef<Path>) -> Result<Chart, Error> {
    let path = path.as_ref();
    let meta =
        std::fs::metadata(path).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    if meta.is_dir() {
        return load_dir(path);
    }
    if meta.len() > MAX_CHART_SIZE {
        return Err(Error::new(format!(
            "{}: the archive is larger than the maximum chart size {MAX_CHART_SIZE}",
            path.display()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(Error::new(format!(
            "file '{}' does not appear to be a gzipped archive",
            path.display()
        )));
    }
    load_archive(&bytes)
}

/// Loads a chart from the bytes of a `.tgz` archive (one top directory holding the chart).
pub fn load_archive(bytes: &[u8]) -> Result<Chart, Error> {
    load_archive_at(bytes, 0)
}

fn load_archive_at(bytes: &[u8], depth: usize) -> Result<Chart, Error> {
    let files = archive_files(bytes)?;
    load_files(files, depth)
}

/// The files of a chart archive, their top directory stripped, refusing anything unsafe.
fn archive_files(bytes: &[u8]) -> Result<Vec<File>, Error> {
    let gz = flate2::read::GzDecoder::new(bytes);
    let mut archive = tar::Archive::new(gz);
    let entries = archive
        .entries()
        .map_err(|e| Error::new(format!("reading the chart archive: {e}")))?;
    let mut files = Vec::new();
    let mut total: u64 = 0;
    for entry in entries {
        let mut entry = entry.map_err(|e| Error::new(format!("reading the chart archive: {e}")))?;
        let header_path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        if kind.is_dir() || kind.is_pax_global_extensions() || kind.is_pax_local_extensions() {
            continue;
        }
        if kind.is_symlink() || kind.is_hard_link() {
            return Err(Error::new(format!(
                "chart archive entry {header_path:?} is a link, which charts may not contain"
            )));
        }
        if !(kind.is_file() || kind == tar::EntryType::Continuous) {
            return Err(Error::new(format!(
                "chart archive entry {header_path:?} is not a regular file"
            )));
        }
        let name = entry_name(&header_path)?;
        let size = entry.header().size().unwrap_or(u64::MAX);
        if size > MAX_FILE_SIZE {
            return Err(Error::new(format!(
                "decompressed chart file {header_path:?} is larger than the maximum file size {MAX_FILE_SIZE}"
            )));
        }
        total = total.saturating_add(size);
        if total > MAX_CHART_SIZE {
            return Err(Error::new(format!(
                "decompressed chart is larger than the maximum size {MAX_CHART_SIZE}"
            )));
        }
        let mut data = Vec::new();
        // Read one byte past the cap so a lying header cannot smuggle more in.
        (&mut entry)
            .take(MAX_FILE_SIZE + 1)
            .read_to_end(&mut data)
            .map_err(|e| {
                Error::new(format!(
                    "reading {header_path:?} from the chart archive: {e}"
                ))
            })?;
        if data.len() as u64 > MAX_FILE_SIZE {
            return Err(Error::new(format!(
                "decompressed chart file {header_path:?} is larger than the maximum file size {MAX_FILE_SIZE}"
            )));
        }
        strip_bom(&mut data);
        files.push(File { name, data });
    }
    if files.is_empty() {
        return Err(Error::new("no files in chart archive"));
    }
    Ok(files)
}

/// The path of an archive entry inside the chart: the top directory dropped, normalised, and
/// refused when it is absolute or leaves the chart.
fn entry_name(header_path: &str) -> Result<String, Error> {
    let delimiter = if header_path.contains('\\') {
        '\\'
    } else {
        '/'
    };
    let mut parts = header_path.split(delimiter);
    let top = parts.next().unwrap_or("");
    let rest: Vec<&str> = parts.collect();
    let joined = rest.join("/");
    if joined.starts_with('/') {
        return Err(Error::new(format!(
            "chart illegally contains absolute paths: {header_path:?}"
        )));
    }
    let name = clean_path(&joined);
    if name == "." {
        if top == "Chart.yaml" {
            return Err(Error::new("chart yaml not in base directory"));
        }
        return Err(Error::new(format!(
            "chart illegally contains content outside the base directory: {header_path:?}"
        )));
    }
    if name.starts_with("..") {
        return Err(Error::new(format!(
            "chart illegally references parent directory: {header_path:?}"
        )));
    }
    let bytes = name.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(Error::new(format!(
            "chart contains illegally named files: {header_path:?}"
        )));
    }
    Ok(name)
}

/// Go's `path.Clean` for relative paths.
fn clean_path(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|p| *p != "..") {
                    out.pop();
                } else {
                    out.push("..");
                }
            }
            p => out.push(p),
        }
    }
    if out.is_empty() {
        ".".into()
    } else {
        out.join("/")
    }
}

fn strip_bom(data: &mut Vec<u8>) {
    if data.starts_with(UTF8_BOM) {
        data.drain(..UTF8_BOM.len());
    }
}

/// Loads a chart directory, honouring its `.helmignore`.
fn load_dir(root: &Path) -> Result<Chart, Error> {
    let rules = match std::fs::read_to_string(root.join(".helmignore")) {
        Ok(text) => Rules::parse(&text).map_err(|e| Error::new(format!(".helmignore: {e}")))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Rules::parse("").map_err(Error::new)?
        }
        Err(e) => return Err(Error::new(format!(".helmignore: {e}"))),
    };
    let canonical_root = root
        .canonicalize()
        .map_err(|e| Error::new(format!("{}: {e}", root.display())))?;
    let mut walk = Walk {
        rules,
        root: canonical_root,
        files: Vec::new(),
        entries: 0,
        total: 0,
    };
    walk.dir(root, "")?;
    load_files(walk.files, 0)
}

struct Walk {
    rules: Rules,
    root: PathBuf,
    files: Vec<File>,
    entries: usize,
    total: u64,
}

impl Walk {
    fn dir(&mut self, dir: &Path, prefix: &str) -> Result<(), Error> {
        let read =
            std::fs::read_dir(dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
        let mut names: Vec<(String, PathBuf)> = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
            names.push((
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            ));
        }
        // Go's filepath.Walk visits entries in lexical order.
        names.sort();
        for (name, path) in names {
            self.entries += 1;
            if self.entries > MAX_DIR_ENTRIES {
                return Err(Error::new(format!(
                    "{}: more than {MAX_DIR_ENTRIES} files in the chart",
                    self.root.display()
                )));
            }
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            // Links are followed (as Helm does) but must stay inside the chart.
            let resolved = path
                .canonicalize()
                .map_err(|e| Error::new(format!("{rel}: {e}")))?;
            if !resolved.starts_with(&self.root) {
                return Err(Error::new(format!(
                    "{rel}: the link points outside the chart directory"
                )));
            }
            let meta =
                std::fs::metadata(&resolved).map_err(|e| Error::new(format!("{rel}: {e}")))?;
            if meta.is_dir() {
                if self.rules.ignored(&rel, true) {
                    continue;
                }
                if rel.matches('/').count() > 4 * MAX_NESTING {
                    return Err(Error::new(format!(
                        "{rel}: the chart's directories nest too deep"
                    )));
                }
                self.dir(&path, &rel)?;
                continue;
            }
            if self.rules.ignored(&rel, false) {
                continue;
            }
            if !meta.is_file() {
                return Err(Error::new(format!(
                    "cannot load irregular file {rel} as it has file mode type bits set"
                )));
            }
            if meta.len() > MAX_FILE_SIZE {
                return Err(Error::new(format!(
                    "chart file {rel:?} is larger than the maximum file size {MAX_FILE_SIZE}"
                )));
            }
            self.total += meta.len();
            if self.total > MAX_CHART_SIZE {
                return Err(Error::new(format!(
                    "the chart is larger than the maximum size {MAX_CHART_SIZE}"
                )));
            }
            let mut data =
                std::fs::read(&resolved).map_err(|e| Error::new(format!("{rel}: {e}")))?;
            strip_bom(&mut data);
            self.files.push(File { name: rel, data });
        }
        Ok(())
    }
}

/// Builds a chart from its files (Helm's `LoadFiles`): sorts them into metadata, values,
/// schema, templates, other files and subcharts.
pub(crate) fn load_files(files: Vec<File>, depth: usize) -> Result<Chart, Error> {
    if depth > MAX_NESTING {
        return Err(Error::new("subcharts nest too deep"));
    }
    let mut chart = Chart::default();
    let mut chart_yaml: Option<Vec<u8>> = None;
    let mut requirements: Option<Vec<u8>> = None;
    let mut values: Option<Vec<u8>> = None;
    let mut subcharts: BTreeMap<String, Vec<File>> = BTreeMap::new();
    for file in files {
        match file.name.as_str() {
            "Chart.yaml" => chart_yaml = Some(file.data),
            "values.yaml" => values = Some(file.data),
            "values.schema.json" => chart.schema = Some(file.data),
            "requirements.yaml" => requirements = Some(file.data),
            "Chart.lock" | "requirements.lock" => {}
            name if name.starts_with("templates/") => chart.templates.push(file),
            name if name.starts_with("charts/") => {
                if Path::new(name).extension().is_some_and(|e| e == "prov") {
                    chart.files.push(file);
                    continue;
                }
                let inner = &name["charts/".len()..];
                let (sub, rest) = inner.split_once('/').unwrap_or((inner, ""));
                let sub = sub.to_string();
                let entry_name = if rest.is_empty() {
                    inner.to_string()
                } else {
                    rest.to_string()
                };
                subcharts.entry(sub).or_default().push(File {
                    name: entry_name,
                    data: file.data,
                });
            }
            _ => chart.files.push(file),
        }
    }
    let Some(chart_yaml) = chart_yaml else {
        return Err(Error::new("Chart.yaml file is missing"));
    };
    chart.metadata = metadata::parse_chart_yaml(&chart_yaml)?;
    if let Some(requirements) = requirements {
        chart.metadata.dependencies = metadata::parse_requirements(&requirements)?;
    }
    if let Some(values) = values {
        chart.values = super::values::read_values(&values)
            .map_err(|e| Error::new(format!("cannot load values.yaml: {e}")))?;
    }
    metadata::validate(&chart.metadata)?;
    for (name, files) in subcharts {
        if name.starts_with('_') || name.starts_with('.') {
            continue;
        }
        let sub = if Path::new(&name).extension().is_some_and(|e| e == "tgz") {
            match files.as_slice() {
                [file] if file.name == name => load_archive_at(&file.data, depth + 1),
                _ => Err(Error::new(format!(
                    "error unpacking subchart tar in {}: expected {name}",
                    chart.metadata.name
                ))),
            }
        } else {
            // A lone file directly under charts/ is not a chart: Helm loads it as an empty one.
            let files: Vec<File> = files.into_iter().filter(|f| f.name != name).collect();
            load_files(files, depth + 1)
        };
        let sub = sub.map_err(|e| {
            Error::new(format!(
                "error unpacking subchart {name} in {}: {e}",
                chart.metadata.name
            ))
        })?;
        chart.dependencies.push(sub);
    }
    Ok(chart)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names() {
        assert_eq!(
            entry_name("c/templates/a.yaml").ok().as_deref(),
            Some("templates/a.yaml")
        );
        assert_eq!(entry_name("c/./x//y").ok().as_deref(), Some("x/y"));
        assert!(entry_name("c/../../etc/passwd").is_err());
        assert!(entry_name("c//etc/passwd").is_err());
        assert!(entry_name("Chart.yaml").is_err());
        assert!(entry_name("c/c:/x").is_err());
    }
}
