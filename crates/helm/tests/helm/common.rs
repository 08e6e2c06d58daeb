//! Shared pieces: corpus paths, chart loading, the oracle process, and comparing renders the
//! way the corpus README prescribes (documents split as Helm splits them, parsed YAML compared
//! document by document, keyed by template path and position).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use capstan_helm::chart::Chart;
use capstan_helm::output::split_manifests;

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::canonicalize(&root).unwrap_or(root)
}

/// The shared corpus: `$CAPSTAN_CORPUS`, else `../shared/corpus` beside the repository.
pub fn corpus() -> PathBuf {
    if let Some(dir) = std::env::var_os("CAPSTAN_CORPUS") {
        return PathBuf::from(dir);
    }
    let dir = repo_root().join("../shared/corpus");
    assert!(
        dir.is_dir(),
        "the test corpus is missing: expected {} (or set CAPSTAN_CORPUS)",
        dir.display()
    );
    dir
}

/// Reads a JSON file of the corpus.
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Loads a chart directory or archive with the crate's loader.
pub fn load_chart(path: &Path) -> Result<Chart, String> {
    capstan_helm::output::load_chart(path).map_err(|e| e.message)
}

/// Values files (relative to `base`) read as Helm reads `-f` files and merged in order.
pub fn values_files(
    base: &Path,
    files: &[String],
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut values = serde_json::Map::new();
    for file in files {
        let path = base.join(file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{file}: {e}"))?;
        match capstan_helm::yaml::parse(&text).map_err(|e| format!("{file}: {e}"))? {
            serde_json::Value::Object(map) => capstan_helm::output::merge_maps(&mut values, map),
            serde_json::Value::Null => {}
            _ => return Err(format!("{file}: not a map")),
        }
    }
    Ok(values)
}

/// The Python of the venv `scripts/setup` makes, with the Helm SDK in it.
pub fn venv_python() -> PathBuf {
    let python = repo_root().join(".tools/helm-venv/bin/python");
    assert!(
        python.is_file(),
        "the Helm SDK oracle is not installed: {} is missing; run scripts/setup (it installs \
         helm-python-sdk==0.2.2 into .tools/helm-venv)",
        python.display()
    );
    python
}

/// `oracle.py serve`: Helm v4.2.3's Go SDK answering JSON requests, one per line.
pub struct Oracle {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Oracle {
    /// Starts the oracle process.
    pub fn start() -> Oracle {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle.py");
        let mut child = Command::new(venv_python())
            .arg(script)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the oracle starts");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Oracle {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends one request; `Ok(answer)` or `Err(the SDK's error text)`.
    pub fn request(&mut self, request: &serde_json::Value) -> Result<serde_json::Value, String> {
        let line = serde_json::to_string(request).expect("requests serialise");
        writeln!(self.stdin, "{line}").expect("the oracle reads requests");
        self.stdin.flush().expect("the oracle reads requests");
        let mut answer = String::new();
        self.stdout
            .read_line(&mut answer)
            .expect("the oracle answers");
        let mut answer: serde_json::Value = serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("oracle answer {answer:?}: {e}"));
        if let Some(error) = answer.get("error") {
            return Err(error.as_str().unwrap_or_default().to_owned());
        }
        Ok(answer["ok"].take())
    }

    /// Renders a chart directory: template path → text, as `helm_render` answers.
    pub fn render(
        &mut self,
        chart: &Path,
        values: &serde_json::Map<String, serde_json::Value>,
        options: &serde_json::Value,
    ) -> Result<BTreeMap<String, String>, String> {
        let answer = self.request(&serde_json::json!({
            "op": "render", "chart": chart, "values": values, "options": options,
        }))?;
        Ok(answer
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default())
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One YAML document of a render: the template it came from, its position there, its text.
#[derive(Debug, Clone)]
pub struct Doc {
    pub source: String,
    pub index: usize,
    pub text: String,
}

/// The documents of a render (template path → text) in the corpus's order: paths in byte
/// order, `NOTES.txt`, partials and whitespace-only texts skipped, each text trimmed and split
/// as Helm splits it.
pub fn render_docs(files: &BTreeMap<String, String>) -> Vec<Doc> {
    let mut docs = Vec::new();
    for (path, text) in files {
        let base = path.rsplit('/').next().unwrap_or(path);
        if path.ends_with("NOTES.txt") || base.starts_with('_') || text.trim().is_empty() {
            continue;
        }
        push_docs(&mut docs, path, text.trim());
    }
    docs
}

/// The documents of an `expected/<set>.yaml` file (`---\n# Source: PATH\n<text>\n` blocks).
pub fn expected_docs(text: &str) -> Vec<Doc> {
    let mut docs = Vec::new();
    let mut blocks: Vec<(String, String)> = Vec::new();
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        if line == "---\n"
            && let Some(next) = lines.peek()
            && let Some(source) = next.strip_prefix("# Source: ")
        {
            blocks.push((source.trim_end().to_owned(), String::new()));
            lines.next();
            continue;
        }
        if let Some((_, body)) = blocks.last_mut() {
            body.push_str(line);
        }
    }
    for (source, body) in blocks {
        push_docs(&mut docs, &source, body.trim());
    }
    docs
}

fn push_docs(docs: &mut Vec<Doc>, source: &str, text: &str) {
    for (index, doc) in split_manifests(text).into_iter().enumerate() {
        docs.push(Doc {
            source: source.to_owned(),
            index,
            text: doc.trim_end().to_owned(),
        });
    }
}

/// Parses a document for comparison with an independent reader (serde-saphyr); `None` when
/// it is not YAML it can read (then the texts are compared).
pub fn parse_doc(text: &str) -> Option<serde_json::Value> {
    serde_saphyr::from_str::<serde_json::Value>(text).ok()
}

/// How two renders compare.
#[derive(Debug, Default)]
pub struct Comparison {
    /// Documents compared.
    pub docs: usize,
    /// Documents whose text differs although the parsed YAML is equal.
    pub text_only: usize,
    /// Short descriptions of real differences.
    pub diffs: Vec<String>,
}

/// Compares documents keyed by (source, position). Documents of `unstable` templates (random
/// data) are compared by shape: kinds, apiVersions and names equal, other strings masked.
pub fn compare(expected: &[Doc], actual: &[Doc], unstable: &BTreeSet<String>) -> Comparison {
    let key = |d: &Doc| (d.source.clone(), d.index);
    let want: BTreeMap<_, _> = expected.iter().map(|d| (key(d), d)).collect();
    let got: BTreeMap<_, _> = actual.iter().map(|d| (key(d), d)).collect();
    let mut out = Comparison::default();
    for (k, e) in &want {
        out.docs += 1;
        let Some(a) = got.get(k) else {
            out.diffs.push(format!("missing {}#{}", k.0, k.1));
            continue;
        };
        if e.text == a.text {
            continue;
        }
        let (pe, pa) = (parse_doc(&e.text), parse_doc(&a.text));
        let equal = match (&pe, &pa) {
            (Some(x), Some(y)) if unstable.contains(&k.0) => mask(x) == mask(y),
            (Some(x), Some(y)) => x == y,
            _ => false,
        };
        if equal {
            if !unstable.contains(&k.0) {
                out.text_only += 1;
            }
            continue;
        }
        let detail = match (&pe, &pa) {
            (Some(x), Some(y)) => first_difference(x, y, ""),
            _ => first_text_difference(&e.text, &a.text),
        };
        out.diffs.push(format!("{}#{}: {detail}", k.0, k.1));
    }
    for k in got.keys() {
        if !want.contains_key(k) {
            out.diffs.push(format!("unexpected {}#{}", k.0, k.1));
        }
    }
    out
}

/// Strings replaced by a marker, except the identity fields (kind, apiVersion, name).
fn mask(value: &serde_json::Value) -> serde_json::Value {
    fn walk(value: &serde_json::Value, key: &str) -> serde_json::Value {
        match value {
            serde_json::Value::String(_) if !matches!(key, "kind" | "apiVersion" | "name") => {
                serde_json::Value::String("<masked>".into())
            }
            serde_json::Value::Object(map) => serde_json::Value::Object(
                map.iter().map(|(k, v)| (k.clone(), walk(v, k))).collect(),
            ),
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(|v| walk(v, key)).collect())
            }
            other => other.clone(),
        }
    }
    walk(value, "")
}

/// The path and values of the first difference between two parsed documents.
pub fn first_difference(want: &serde_json::Value, got: &serde_json::Value, path: &str) -> String {
    use serde_json::Value::{Array, Object};
    match (want, got) {
        (Object(a), Object(b)) => {
            for (k, v) in a {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    None => return format!("{p}: missing"),
                    Some(w) if w != v => return first_difference(v, w, &p),
                    _ => {}
                }
            }
            if let Some(k) = b.keys().find(|k| !a.contains_key(*k)) {
                return format!("{path}.{k}: unexpected");
            }
            format!("{path}: differs")
        }
        (Array(a), Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                if v != w {
                    return first_difference(v, w, &format!("{path}[{i}]"));
                }
            }
            format!("{path}: differs")
        }
        _ => format!(
            "{}: want {} got {}",
            if path.is_empty() { "." } else { path },
            short(&want.to_string()),
            short(&got.to_string())
        ),
    }
}

/// The first differing line of two texts.
pub fn first_text_difference(want: &str, got: &str) -> String {
    let mut w = want.lines();
    let mut g = got.lines();
    let mut line = 1;
    loop {
        match (w.next(), g.next()) {
            (None, None) => return "texts differ (whitespace)".into(),
            (a, b) if a == b => line += 1,
            (a, b) => {
                let (a, b) = (a.unwrap_or("<end>"), b.unwrap_or("<end>"));
                // Show the lines from a little before where they part.
                let same = a
                    .char_indices()
                    .zip(b.chars())
                    .take_while(|((_, x), y)| x == y)
                    .last()
                    .map_or(0, |((i, _), _)| i);
                let from = a
                    .char_indices()
                    .map(|(i, _)| i)
                    .rfind(|i| *i + 40 <= same)
                    .unwrap_or(0);
                let tail = |s: &str| s.get(from..).unwrap_or(s).to_owned();
                return format!(
                    "line {line}: want {:?} got {:?}",
                    short(&tail(a)),
                    short(&tail(b))
                );
            }
        }
    }
}

/// At most 120 characters of `text`.
pub fn short(text: &str) -> String {
    if text.chars().count() <= 120 {
        return text.to_owned();
    }
    let cut: String = text.chars().take(117).collect();
    format!("{cut}...")
}

/// Whether a Helm error text loosely matches ours: for a `fail`/`required`, the message after
/// the template position; for a schema error, every `at '/path'` it names.
pub fn error_matches(expected: &str, actual: &str) -> bool {
    let expected = expected.trim();
    let body = expected.split_once(": ").map_or(expected, |(_, b)| b);
    if body.starts_with("values don't meet the specifications") {
        return actual.contains("values don't meet the specifications")
            && body
                .lines()
                .filter_map(|l| l.trim().strip_prefix("- at '"))
                .filter_map(|l| l.split('\'').next())
                .all(|path| actual.contains(&format!("at '{path}'")));
    }
    if let Some((_, message)) = body.split_once("): ") {
        let first = message.trim().lines().find(|l| !l.trim().is_empty());
        return first.is_none_or(|l| actual.contains(l.trim()));
    }
    actual.contains(body.lines().next().unwrap_or(body))
}
