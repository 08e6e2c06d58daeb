//! Loading charts from directories and `.tgz` archives, as Helm's loader does.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
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

/// How many `values.yaml` files and subchart archives a thread keeps read (see [`Cache`]), and
/// how many bytes of their sources in all.
const CACHE_ENTRIES: usize = 256;
const CACHE_BYTES: usize = 64 << 20;

/// What loading read before, by the bytes it was read from. Charts are loaded again and again
/// (every render of a release) and mostly hold the same `values.yaml` files and packed
/// subcharts: reading YAML and inflating archives costs far more than cloning the result.
/// Only successes are kept; a hit also compares the source bytes, so the result is exactly
/// what reading them again would give. A result is kept the second time its bytes are read,
/// so that a process loading one chart once (`helm template`) holds no copies.
#[derive(Default)]
struct Cache<T> {
    /// The source bytes, the value and its cost (source plus weight).
    entries: HashMap<u64, (Vec<u8>, (T, usize))>,
    /// Hashes of the sources read once so far.
    seen: std::collections::HashSet<u64>,
    bytes: usize,
}

impl<T: Clone> Cache<T> {
    fn get(&self, key: &[u8]) -> Option<T> {
        let (source, value) = self.entries.get(&crate::template::quick_hash(key))?;
        (source.as_slice() == key).then(|| value.0.clone())
    }

    /// Keeps `value()` for `key` (from its second reading on). `weight` is what the value
    /// holds beyond the key (for an archive, what it decompressed to), so the budget counts
    /// what the cache really keeps.
    fn put(&mut self, key: &[u8], weight: usize, value: impl FnOnce() -> T) {
        let cost = key.len().saturating_add(weight);
        if cost > CACHE_BYTES {
            return;
        }
        let hash = crate::template::quick_hash(key);
        if self.seen.len() >= 4 * CACHE_ENTRIES {
            self.seen.clear();
        }
        if self.seen.insert(hash) {
            return;
        }
        if self.entries.len() >= CACHE_ENTRIES || self.bytes + cost > CACHE_BYTES {
            self.entries.clear();
            self.bytes = 0;
        }
        self.bytes += cost;
        if let Some((_, (_, old))) = self.entries.insert(hash, (key.to_vec(), (value(), cost))) {
            self.bytes -= old.min(self.bytes);
        }
    }
}

/// A loaded subchart archive: the chart, and what its archives decompressed in all.
type LoadedArchive = (Chart, u64);

/// Leaks the thread's values, `Chart.yaml` and archive caches (see
/// [`crate::leak_thread_caches`]).
pub(super) fn leak_caches() {
    crate::leak(&VALUES);
    crate::leak(&METADATA);
    crate::leak(&ARCHIVES);
}

thread_local! {
    /// Parsed `values.yaml` files by their bytes.
    static VALUES: RefCell<Cache<super::values::Values>> = RefCell::default();
    /// Parsed `Chart.yaml` files by their bytes.
    static METADATA: RefCell<Cache<super::Metadata>> = RefCell::default();
    /// Subchart archives by their bytes, with the nesting depth they were loaded at (a hit
    /// must have the same: the depth decides whether nested subcharts are refused for nesting
    /// too deep).
    static ARCHIVES: RefCell<Cache<(usize, LoadedArchive)>> = RefCell::default();
}

/// `values.yaml` read as [`super::values::read_values`] reads it, from the thread's cache when
/// the same bytes were read before.
fn cached_values(data: &[u8]) -> Result<super::values::Values, String> {
    if let Some(values) = VALUES.with(|c| c.borrow().get(data)) {
        return Ok(values);
    }
    let values = super::values::read_values(data)?;
    // The parsed form is counted as twice the text it came from.
    VALUES.with(|c| c.borrow_mut().put(data, data.len() * 2, || values.clone()));
    Ok(values)
}

/// `Chart.yaml` read as [`metadata::parse_chart_yaml`] reads it, from the thread's cache when
/// the same bytes were read before.
fn cached_metadata(data: &[u8]) -> Result<super::Metadata, Error> {
    if let Some(metadata) = METADATA.with(|c| c.borrow().get(data)) {
        return Ok(metadata);
    }
    let metadata = metadata::parse_chart_yaml(data)?;
    let weight = data.len() * 2;
    METADATA.with(|c| c.borrow_mut().put(data, weight, || metadata.clone()));
    Ok(metadata)
}

/// The archive of `bytes` loaded at `depth`, from [`ARCHIVES`].
fn archive_hit(bytes: &[u8], depth: usize) -> Option<LoadedArchive> {
    ARCHIVES
        .with(|c| c.borrow().get(bytes))
        .and_then(|(at, loaded)| (at == depth).then_some(loaded))
}

/// Keeps the archive of `bytes` loaded at `depth` in [`ARCHIVES`] (`size`: what it
/// decompressed to).
fn archive_put(bytes: &[u8], depth: usize, chart: &Chart, size: u64) {
    let weight = usize::try_from(size).unwrap_or(usize::MAX);
    ARCHIVES.with(|c| {
        c.borrow_mut()
            .put(bytes, weight, || (depth, (chart.clone(), size)));
    });
}

/// A subchart archive loaded as [`load_archive_at`] loads it, from the thread's cache when the
/// same bytes were loaded at the same depth before and the budget still allows them.
fn cached_archive(bytes: &[u8], depth: usize, unpacked: &mut u64) -> Result<Chart, Error> {
    if let Some((chart, size)) = archive_hit(bytes, depth)
        && unpacked.saturating_add(size) <= MAX_CHART_SIZE
    {
        *unpacked += size;
        return Ok(chart);
    }
    let before = *unpacked;
    let chart = load_archive_at(bytes, depth, unpacked)?;
    archive_put(bytes, depth, &chart, unpacked.saturating_sub(before));
    Ok(chart)
}

/// Packed subcharts (compressed bytes) from which inflating them on a second thread pays.
const INFLATE_AHEAD_BYTES: usize = 256 * 1024;

/// An archive's files and decompressed size, read on another thread from the archive's bytes
/// (shared with it instead of copied; taken out of the subchart's file).
type Inflating = (
    std::thread::JoinHandle<Result<(Vec<File>, u64), Error>>,
    std::sync::Arc<Vec<u8>>,
);

/// Starts inflating, each on its own thread, the subchart archives of `subcharts` (a chart's
/// `charts/` by subchart name) large enough to pay for it and not in the thread's cache. The
/// result is used only when it is a success within the budget; anything else is read again in
/// order, so errors are those of reading in order.
fn inflate_ahead(
    subcharts: &mut BTreeMap<String, Vec<File>>,
    depth: usize,
) -> HashMap<String, Inflating> {
    let mut started = HashMap::new();
    for (name, files) in subcharts {
        let [file] = files.as_mut_slice() else {
            continue;
        };
        if file.name != *name
            || file.data.len() < INFLATE_AHEAD_BYTES
            || name.starts_with(['_', '.'])
            || Path::new(name).extension().is_none_or(|e| e != "tgz")
        {
            continue;
        }
        if archive_hit(&file.data, depth + 1).is_some() {
            continue;
        }
        let data = std::sync::Arc::new(std::mem::take(&mut file.data));
        let shared = std::sync::Arc::clone(&data);
        let worker = std::thread::Builder::new().spawn(move || {
            let mut size = 0;
            archive_files(&shared, &mut size).map(|files| (files, size))
        });
        match worker {
            Ok(worker) => {
                started.insert(name.clone(), (worker, data));
            }
            // Not started: the closure (and its share) is gone, the bytes go back.
            Err(_) => file.data = std::sync::Arc::unwrap_or_clone(data),
        }
    }
    started
}

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

/// Loads a chart from the files of a chart directory that the caller read from another file
/// system than the disk (an in-memory tree, an unpacked artifact). `files` are named relative
/// to the chart root, `/`-separated, in the order a directory walk visits them (each
/// directory's entries in byte order), with what `.helmignore` ([`super::IgnoreRules`]) ignores
/// already left out; links must already be resolved and kept inside the chart by the caller.
/// The size caps of [`load`] apply.
///
/// # Errors
///
/// A file or the whole chart over [`MAX_FILE_SIZE`]/[`MAX_CHART_SIZE`], or what loading a
/// directory reports (a missing or malformed `Chart.yaml`, bad values, subcharts).
pub fn load_dir_files(files: Vec<File>) -> Result<Chart, Error> {
    let mut total: u64 = 0;
    let mut checked = Vec::with_capacity(files.len());
    for mut file in files {
        let size = file.data.len() as u64;
        if size > MAX_FILE_SIZE {
            return Err(Error::new(format!(
                "chart file {:?} is larger than the maximum file size {MAX_FILE_SIZE}",
                file.name
            )));
        }
        total = total.saturating_add(size);
        if total > MAX_CHART_SIZE {
            return Err(Error::new(format!(
                "the chart is larger than the maximum size {MAX_CHART_SIZE}"
            )));
        }
        strip_bom(&mut file.data);
        checked.push(file);
    }
    load_files(checked, 0, &mut total)
}

/// Loads a chart from the bytes of a `.tgz` archive (one top directory holding the chart).
pub fn load_archive(bytes: &[u8]) -> Result<Chart, Error> {
    load_archive_at(bytes, 0, &mut 0)
}

/// `unpacked` counts what every archive of this load has decompressed so far: archives
/// nested in archives share the one [`MAX_CHART_SIZE`] budget, so a chart of packed
/// subcharts cannot multiply it.
fn load_archive_at(bytes: &[u8], depth: usize, unpacked: &mut u64) -> Result<Chart, Error> {
    let files = archive_files(bytes, unpacked)?;
    load_files(files, depth, unpacked)
}

/// The files of a chart archive, their top directory stripped, refusing anything unsafe.
fn archive_files(bytes: &[u8], unpacked: &mut u64) -> Result<Vec<File>, Error> {
    let gz = flate2::read::GzDecoder::new(bytes);
    let mut archive = tar::Archive::new(gz);
    let entries = archive
        .entries()
        .map_err(|e| Error::new(format!("reading the chart archive: {e}")))?;
    let mut files = Vec::new();
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
        *unpacked = unpacked.saturating_add(size);
        if *unpacked > MAX_CHART_SIZE {
            return Err(Error::new(format!(
                "decompressed chart is larger than the maximum size {MAX_CHART_SIZE} (at {header_path:?})"
            )));
        }
        // The header's size (capped above) spares the reallocations of a growing buffer.
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
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
    let walk = Walk::run(root)?;
    let mut unpacked = walk.total;
    load_files(walk.files, 0, &mut unpacked)
}

/// The files of a chart directory that Helm's loader reads, in its walk order (the loader's
/// and `helm package`'s): `.helmignore` honoured, links followed but kept inside the chart,
/// irregular files refused, sizes capped.
pub(crate) struct Walk {
    rules: Rules,
    root: PathBuf,
    /// The files, a leading byte order mark dropped.
    pub(crate) files: Vec<File>,
    /// The modification time of each file of `files`, when the system gives one.
    pub(crate) modified: Vec<Option<std::time::SystemTime>>,
    entries: usize,
    /// The bytes read.
    pub(crate) total: u64,
}

impl Walk {
    /// Walks the chart directory `root`.
    pub(crate) fn run(root: &Path) -> Result<Self, Error> {
        let rules = match std::fs::read_to_string(root.join(".helmignore")) {
            // Helm reports a bad rule without naming the file; so does this.
            Ok(text) => Rules::parse(&text).map_err(Error::new)?,
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
            modified: Vec::new(),
            entries: 0,
            total: 0,
        };
        let canonical = walk.root.clone();
        walk.dir(root, &canonical, "")?;
        Ok(walk)
    }

    /// Walks `dir`, whose canonical path is `canonical_dir` (inside the root).
    fn dir(&mut self, dir: &Path, canonical_dir: &Path, prefix: &str) -> Result<(), Error> {
        let read =
            std::fs::read_dir(dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
        let mut names: Vec<(String, PathBuf, Option<std::fs::FileType>)> = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
            // The entry's type usually comes with the directory listing: no system call.
            // `None`: a link, or a type the listing did not give.
            let kind = entry.file_type().ok().filter(|kind| !kind.is_symlink());
            names.push((
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
                kind,
            ));
        }
        // Go's filepath.Walk visits entries in lexical order.
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, path, kind) in names {
            let link = kind.is_none();
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
            // What `.helmignore` leaves out is never read, so it is skipped before the link
            // check: Helm loads such a chart, whatever the ignored link points to.
            // A link's type is its target's (and a file's size is checked while reading).
            let kind = match kind {
                Some(kind) => kind,
                None => std::fs::metadata(&path)
                    .map_err(|e| Error::new(format!("{rel}: {e}")))?
                    .file_type(),
            };
            if self.rules.ignored(&rel, kind.is_dir()) {
                continue;
            }
            // Links are followed (as Helm does) but must stay inside the chart. Anything else
            // sits in the canonical directory already, and resolving it again (a system call
            // per path component) would only cost time.
            let resolved = if link {
                path.canonicalize()
                    .map_err(|e| Error::new(format!("{rel}: {e}")))?
            } else {
                match path.file_name() {
                    Some(file_name) => canonical_dir.join(file_name),
                    None => canonical_dir.to_path_buf(),
                }
            };
            if !resolved.starts_with(&self.root) {
                return Err(Error::new(format!(
                    "{rel}: the link points outside the chart directory"
                )));
            }
            if kind.is_dir() {
                if rel.matches('/').count() > 4 * MAX_NESTING {
                    return Err(Error::new(format!(
                        "{rel}: the chart's directories nest too deep"
                    )));
                }
                self.dir(&path, &resolved, &rel)?;
                continue;
            }
            if !kind.is_file() {
                return Err(Error::new(format!(
                    "cannot load irregular file {rel} as it has file mode type bits set"
                )));
            }
            let too_large = || {
                Error::new(format!(
                    "chart file {rel:?} is larger than the maximum file size {MAX_FILE_SIZE}"
                ))
            };
            let mut file =
                std::fs::File::open(&resolved).map_err(|e| Error::new(format!("{rel}: {e}")))?;
            let metadata = file
                .metadata()
                .map_err(|e| Error::new(format!("{rel}: {e}")))?;
            let size = metadata.len();
            if size > MAX_FILE_SIZE {
                return Err(too_large());
            }
            // Read one byte past the cap: a file growing after its size was checked cannot
            // bring in more.
            let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0) + 1);
            (&mut file)
                .take(MAX_FILE_SIZE + 1)
                .read_to_end(&mut data)
                .map_err(|e| Error::new(format!("{rel}: {e}")))?;
            if data.len() as u64 > MAX_FILE_SIZE {
                return Err(too_large());
            }
            self.total += data.len() as u64;
            if self.total > MAX_CHART_SIZE {
                return Err(Error::new(format!(
                    "the chart is larger than the maximum size {MAX_CHART_SIZE}"
                )));
            }
            strip_bom(&mut data);
            self.files.push(File { name: rel, data });
            self.modified.push(metadata.modified().ok());
        }
        Ok(())
    }
}

/// Builds a chart from its files (Helm's `LoadFiles`): sorts them into metadata, values,
/// schema, templates, other files and subcharts.
pub(crate) fn load_files(
    files: Vec<File>,
    depth: usize,
    unpacked: &mut u64,
) -> Result<Chart, Error> {
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
            // Helm keeps the v1 files visible to `.Files` (checked with Helm v4.2.3), but
            // not Chart.lock.
            "requirements.yaml" => {
                requirements = Some(file.data.clone());
                chart.files.push(file);
            }
            "Chart.lock" => {}
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
    // Large packed subcharts are inflated on a second thread while this one reads Chart.yaml
    // and values.yaml.
    let mut inflating = inflate_ahead(&mut subcharts, depth);
    chart.metadata = cached_metadata(&chart_yaml)?;
    if let Some(requirements) = requirements {
        chart.metadata.dependencies = metadata::parse_requirements(&requirements)?;
    }
    if let Some(values) = values {
        chart.values = cached_values(&values)
            .map_err(|e| Error::new(format!("cannot load values.yaml: {e}")))?;
    }
    metadata::validate(&chart.metadata)?;
    for (name, files) in subcharts {
        if name.starts_with('_') || name.starts_with('.') {
            continue;
        }
        let sub = if Path::new(&name).extension().is_some_and(|e| e == "tgz") {
            match files.as_slice() {
                [file] if file.name == name => {
                    let (worker, shared) = inflating.remove(&name).unzip();
                    let bytes = shared.as_deref().unwrap_or(&file.data);
                    match worker.and_then(|worker| {
                        let (files, size) = worker.join().ok()?.ok()?;
                        let total = unpacked.saturating_add(size);
                        // Over the budget: read again below, so the error names the same entry.
                        (total <= MAX_CHART_SIZE).then_some((files, size))
                    }) {
                        Some((inflated, size)) => {
                            let before = *unpacked;
                            *unpacked += size;
                            let sub = load_files(inflated, depth + 1, unpacked);
                            if let Ok(sub) = &sub {
                                archive_put(bytes, depth + 1, sub, unpacked.saturating_sub(before));
                            }
                            sub
                        }
                        None => cached_archive(bytes, depth + 1, unpacked),
                    }
                }
                _ => Err(Error::new(format!(
                    "error unpacking subchart tar in {}: expected {name}",
                    chart.metadata.name
                ))),
            }
        } else {
            // A lone file directly under charts/ is not a chart: Helm loads it as an empty one.
            let files: Vec<File> = files.into_iter().filter(|f| f.name != name).collect();
            load_files(files, depth + 1, unpacked)
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

    /// A tar entry written byte by byte, so tests can build archives the `tar` crate's
    /// builder would refuse (`..`, links).
    fn entry(out: &mut tar::Builder<Vec<u8>>, name: &str, kind: tar::EntryType, data: &[u8]) {
        let mut header = tar::Header::new_gnu();
        let bytes = name.as_bytes();
        if let Some(gnu) = header.as_gnu_mut() {
            gnu.name[..bytes.len()].copy_from_slice(bytes);
        }
        header.set_entry_type(kind);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        if kind == tar::EntryType::Symlink {
            header.set_link_name("/etc/passwd").expect("link name");
        }
        header.set_cksum();
        out.append(&header, data).expect("append");
    }

    fn archive(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, kind, data) in entries {
            entry(&mut builder, name, *kind, data);
        }
        let tar = builder.into_inner().expect("tar");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar).expect("gzip");
        gz.finish().expect("gzip")
    }

    const REGULAR: tar::EntryType = tar::EntryType::Regular;
    const CHART: &[u8] = b"apiVersion: v2\nname: c\nversion: 0.1.0\n";

    #[test]
    fn archives_load_with_nested_archives() {
        let sub = archive(&[
            (
                "sub/Chart.yaml",
                REGULAR,
                b"apiVersion: v2\nname: sub\nversion: 1.0.0\n",
            ),
            ("sub/templates/s.yaml", REGULAR, b"s"),
        ]);
        let top = archive(&[
            ("c/Chart.yaml", REGULAR, CHART),
            ("c/values.yaml", REGULAR, b"\xef\xbb\xbfa: 1\n"),
            ("c/templates/t.yaml", REGULAR, b"t"),
            ("c/crds/x.yaml", REGULAR, b"crd"),
            ("c/charts/sub-1.0.0.tgz", REGULAR, &sub),
        ]);
        let chart = load_archive(&top).expect("chart");
        assert_eq!(chart.metadata.name, "c");
        assert_eq!(
            chart.values.get("a").and_then(serde_json::Value::as_f64),
            Some(1.0)
        );
        let names: Vec<&str> = chart.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["crds/x.yaml"]);
        assert_eq!(chart.dependencies.len(), 1);
        assert_eq!(chart.dependencies[0].metadata.name, "sub");
        assert_eq!(chart.dependencies[0].templates[0].name, "templates/s.yaml");
    }

    #[test]
    fn caches_keep_from_the_second_read_and_compare_bytes() {
        let mut cache = Cache::<u32>::default();
        cache.put(b"a", 0, || 1);
        assert_eq!(cache.get(b"a"), None);
        cache.put(b"a", 0, || 1);
        assert_eq!(cache.get(b"a"), Some(1));
        assert_eq!(cache.get(b"b"), None);
    }

    #[test]
    fn the_cache_budget_counts_what_values_hold() {
        let mut cache = Cache::<u32>::default();
        // A small archive that decompressed to more than the budget is never kept.
        cache.put(b"small", CACHE_BYTES, || 1);
        cache.put(b"small", CACHE_BYTES, || 1);
        assert_eq!(cache.get(b"small"), None);
        // Two values of half the budget each: the second evicts the first.
        for key in [b"x", b"y"] {
            cache.put(key, CACHE_BYTES / 2, || 2);
            cache.put(key, CACHE_BYTES / 2, || 2);
        }
        assert_eq!(cache.get(b"y"), Some(2));
        assert_eq!(cache.get(b"x"), None);
        assert!(cache.bytes <= CACHE_BYTES);
    }

    #[test]
    fn repeated_loads_give_the_same_chart() {
        let sub = archive(&[
            (
                "sub/Chart.yaml",
                REGULAR,
                b"apiVersion: v2\nname: sub\nversion: 1.0.0\n",
            ),
            ("sub/values.yaml", REGULAR, b"x: [1, {y: z}]\n"),
            ("sub/templates/s.yaml", REGULAR, b"s"),
        ]);
        let top = archive(&[
            ("c/Chart.yaml", REGULAR, CHART),
            ("c/values.yaml", REGULAR, b"a: 1\n"),
            ("c/charts/sub-1.0.0.tgz", REGULAR, &sub),
        ]);
        let first = load_archive(&top).expect("chart");
        for _ in 0..3 {
            let again = load_archive(&top).expect("chart");
            assert_eq!(again.metadata, first.metadata);
            assert_eq!(again.values, first.values);
            assert_eq!(
                again.dependencies[0].metadata,
                first.dependencies[0].metadata
            );
            assert_eq!(again.dependencies[0].values, first.dependencies[0].values);
            assert_eq!(
                again.dependencies[0].templates,
                first.dependencies[0].templates
            );
        }
    }

    #[test]
    fn unsafe_archives_refused() {
        let escape = archive(&[
            ("c/Chart.yaml", REGULAR, CHART),
            ("c/../../etc/x", REGULAR, b"x"),
        ]);
        let message = load_archive(&escape).expect_err("escape").message;
        assert!(message.contains("parent directory"), "{message}");
        let link = archive(&[
            ("c/Chart.yaml", REGULAR, CHART),
            ("c/templates/l.yaml", tar::EntryType::Symlink, b""),
        ]);
        let message = load_archive(&link).expect_err("link").message;
        assert!(
            message.contains("c/templates/l.yaml") && message.contains("link"),
            "{message}"
        );
        let big = vec![b'a'; usize::try_from(MAX_FILE_SIZE).unwrap_or(0) + 1];
        let oversize = archive(&[
            ("c/Chart.yaml", REGULAR, CHART),
            ("c/big.txt", REGULAR, &big),
        ]);
        let message = load_archive(&oversize).expect_err("oversize").message;
        assert!(
            message.contains("c/big.txt") && message.contains("maximum file size"),
            "{message}"
        );
        let top_level = archive(&[("Chart.yaml", REGULAR, CHART)]);
        assert_eq!(
            load_archive(&top_level).expect_err("top").message,
            "chart yaml not in base directory"
        );
        assert!(load_archive(b"not gzip").is_err());
    }

    #[test]
    fn directories_as_helm() {
        // Checked with Helm v4.2.3: `.Files` holds only `.helmignore` here; `docs/` is
        // ignored, hidden templates are dropped, values.schema.json and Chart.lock are not
        // files; a stray file under charts/ fails the load.
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let write = |path: &str, text: &str| {
            let full = root.join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(full, text).expect("write");
        };
        write("Chart.yaml", "apiVersion: v2\nname: L\nversion: 0.1.0\n");
        write("values.schema.json", "{\"type\":\"object\"}");
        write("templates/.hidden", "x");
        write("templates/t.yaml", "t");
        write("Chart.lock", "generated: x\n");
        write("docs/a.md", "z");
        write(".helmignore", "docs/\n");
        std::fs::create_dir_all(root.join("charts/_skip")).expect("mkdir");
        let chart = load(root).expect("chart");
        let files: Vec<&str> = chart.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(files, [".helmignore"]);
        let templates: Vec<&str> = chart.templates.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(templates, ["templates/t.yaml"]);
        assert!(chart.schema.is_some());
        write("charts/README.md", "readme");
        assert_eq!(
            load(root).expect_err("stray").message,
            "error unpacking subchart README.md in L: Chart.yaml file is missing"
        );
    }

    /// Helm v4.2.3's load errors for broken charts.
    #[test]
    fn bad_charts_as_helm() {
        let chart = |yaml: &str| File {
            name: "Chart.yaml".into(),
            data: yaml.as_bytes().to_vec(),
        };
        let values = |yaml: &str| File {
            name: "values.yaml".into(),
            data: yaml.as_bytes().to_vec(),
        };
        let good = "apiVersion: v2\nname: b\nversion: 0.1.0\n";
        let cases: Vec<(Vec<File>, &str)> = vec![
            (
                vec![chart(good), values("- a\n")],
                "cannot load values.yaml: cannot unmarshal yaml document: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}",
            ),
            (
                vec![chart(good), values("a: b: c\n")],
                "cannot load values.yaml: cannot unmarshal yaml document: error converting YAML to JSON: yaml: mapping values are not allowed in this context",
            ),
            (
                vec![chart("apiVersion: v2\nversion: 0.1.0\n")],
                "validation: chart.metadata.name is required",
            ),
            (
                vec![chart("apiVersion: v2\nname: b\n")],
                "validation: chart.metadata.version is required",
            ),
            (
                vec![chart("apiVersion: v2\nname: a/b\nversion: 1.0.0\n")],
                "validation: chart.metadata.name \"a/b\" is invalid",
            ),
            (
                vec![chart(
                    "apiVersion: v2\nname: b\nversion: 0.1.0\ntype: foo\n",
                )],
                "validation: chart.metadata.type must be application or library",
            ),
            (
                vec![chart(
                    "apiVersion: v2\nname: b\nversion: 0.1.0\ndependencies:\n  - name: x\n    alias: a.b\n",
                )],
                "validation: dependency \"x\" has disallowed characters in the alias",
            ),
            (
                vec![chart(
                    "apiVersion: v2\nname: b\nversion: 0.1.0\ndependencies:\n  - name: x\n    alias: z\n  - name: z\n",
                )],
                "validation: more than one dependency with name or alias \"z\"",
            ),
            (
                vec![chart(
                    "apiVersion: v2\nname: b\nversion: 1.0.0\ndependencies:\n  - null\n",
                )],
                "validation: dependencies must not contain empty or null nodes",
            ),
            (vec![values("a: 1\n")], "Chart.yaml file is missing"),
        ];
        for (files, want) in cases {
            assert_eq!(load_files(files, 0, &mut 0).expect_err(want).message, want);
        }
    }

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

    /// Damaged archives fail cleanly: every single-byte corruption of a valid one either
    /// loads or errors, never panics.
    #[test]
    fn damaged_archives_never_panic() {
        let good = archive(&[
            ("c/Chart.yaml", REGULAR, CHART),
            ("c/values.yaml", REGULAR, b"a: [1, {b: 2}]\n"),
            ("c/templates/t.yaml", REGULAR, b"{{ .Values.a }}"),
        ]);
        for position in 0..good.len() {
            for flip in [0x01_u8, 0x80, 0xff] {
                let mut damaged = good.clone();
                damaged[position] ^= flip;
                let _ = load_archive(&damaged);
            }
        }
        for cut in 0..good.len() {
            let _ = load_archive(&good[..cut]);
        }
    }
}
