//! Bad and hostile input through the whole `capstan helm template` path (the
//! [`capstan_helm::output::Template`] library call the command makes): every case must end in
//! a clear error naming the template and line, or the file, and never in a panic, a stack
//! overflow or unbounded memory.
//!
//! Expected messages are Helm v4.2.3's own (asked from the oracle, `oracle.py render DIR`, on
//! the same chart) wherever Helm has one. Where Helm crashes (stack overflow, out of memory),
//! follows a link out of the chart, or has no message of its own, the case says why ours
//! differs and asserts that it names the template and line or the file.

use std::io::Write as _;
use std::path::Path;

use capstan_helm::output::{Template, ValueSource};
use capstan_helm::template::Env;

const CHART_YAML: &str = "apiVersion: v2\nname: c\nversion: 0.1.0\n";

/// A chart directory `c` in a fresh temporary directory, with `files` (path → text) in it.
fn chart(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("c");
    std::fs::create_dir_all(root.join("templates")).expect("chart directory");
    std::fs::write(root.join("Chart.yaml"), CHART_YAML).expect("Chart.yaml");
    for (path, text) in files {
        let full = root.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).expect("parent directory");
        }
        std::fs::write(full, text).expect("chart file");
    }
    dir
}

/// `helm template CHART VALUES…` run in `cwd`: the output, or the message after `Error: `.
fn template(cwd: &Path, chart: &str, values: Vec<ValueSource>) -> Result<String, String> {
    let t = Template {
        args: vec![chart.to_owned()],
        values,
        ..Template::default()
    };
    t.execute(cwd, &mut Env::new())
        .map(|r| r.stdout)
        .map_err(|e| e.message)
}

/// The error of rendering the chart `c` of `dir`, with Helm's `--debug` hint removed.
fn error(dir: &Path, values: Vec<ValueSource>) -> String {
    let message = template(dir, "c", values).expect_err("the render fails");
    message
        .strip_suffix("\n\nUse --debug flag to render out invalid YAML")
        .unwrap_or(&message)
        .to_owned()
}

/// The error of rendering a chart whose only template is `text`.
fn template_error(text: &str) -> String {
    error(chart(&[("templates/cm.yaml", text)]).path(), Vec::new())
}

/// A `.tgz` holding `entries` (raw tar names, so `..` can be written) in `dir`.
fn archive(dir: &Path, name: &str, entries: &[(&str, &[u8])]) {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, data) in entries {
        let mut header = tar::Header::new_gnu();
        let raw = &mut header.as_gnu_mut().expect("a GNU header").name;
        raw[..path.len()].copy_from_slice(path.as_bytes());
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        tar.append(&header, *data).expect("tar entry");
    }
    let bytes = tar.into_inner().expect("tar");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).expect("gzip");
    std::fs::write(dir.join(name), gz.finish().expect("gzip")).expect("archive");
}

#[test]
fn template_syntax_error() {
    // Helm: the same words (Helm prefixes the chart's relative path; so do we).
    assert_eq!(
        template_error("a: 1\nb: {{ .Values.x \n"),
        "parse error at (c/templates/cm.yaml:3): unclosed action started at c/templates/cm.yaml:2"
    );
}

#[test]
fn missing_required_value() {
    assert_eq!(
        template_error("a: 1\nb: {{ required \"x is required\" .Values.x }}\n"),
        "execution error at (c/templates/cm.yaml:2:6): x is required"
    );
}

#[test]
fn schema_invalid_value() {
    let dir = chart(&[
        ("templates/cm.yaml", "a: {{ .Values.port }}\n"),
        ("values.yaml", "port: \"eighty\"\n"),
        (
            "values.schema.json",
            r#"{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"port":{"type":"integer"}}}"#,
        ),
    ]);
    assert_eq!(
        error(dir.path(), Vec::new()),
        "values don't meet the specifications of the schema(s) in the following chart(s):\nc:\n- at '/port': got string, want integer\n"
    );
}

#[test]
fn unknown_function() {
    assert_eq!(
        template_error("a: 1\nb: {{ nosuchfunc .Values.x }}\n"),
        "parse error at (c/templates/cm.yaml:2): function \"nosuchfunc\" not defined"
    );
}

#[test]
fn missing_dependency() {
    // `helm template` checks the dependencies before rendering (the SDK's render call
    // alone does not); this is the CLI's message.
    let dir = chart(&[
        ("templates/cm.yaml", "a: 1\n"),
        (
            "Chart.yaml",
            "apiVersion: v2\nname: c\nversion: 0.1.0\ndependencies:\n- name: sub\n  version: 1.0.0\n  repository: https://example.com/charts\n",
        ),
    ]);
    assert_eq!(
        error(dir.path(), Vec::new()),
        "an error occurred while checking for chart dependencies. You may need to run 'helm dependency build' to fetch missing dependencies: found in Chart.yaml, but missing in charts/ directory: sub"
    );
}

#[test]
fn archive_with_parent_entries() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    archive(
        dir.path(),
        "c.tgz",
        &[
            ("c/Chart.yaml", CHART_YAML.as_bytes()),
            ("c/templates/../../../evil.yaml", b"a: 1\n"),
        ],
    );
    // Helm's words, and the entry named (Helm does not name it): the file is the clue.
    assert_eq!(
        template(dir.path(), "c.tgz", Vec::new()).expect_err("refused"),
        "chart illegally references parent directory: \"c/templates/../../../evil.yaml\""
    );
}

#[test]
fn archive_with_oversize_entry() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let big = vec![b'a'; 5 * 1024 * 1024 + 1];
    archive(
        dir.path(),
        "c.tgz",
        &[
            ("c/Chart.yaml", CHART_YAML.as_bytes()),
            ("c/files/big.bin", &big),
        ],
    );
    assert_eq!(
        template(dir.path(), "c.tgz", Vec::new()).expect_err("refused"),
        "decompressed chart file \"c/files/big.bin\" is larger than the maximum file size 5242880"
    );
}

#[test]
fn archive_not_gzip() {
    // Helm adds the detected content type ("; got 'application/octet-stream'"), which comes
    // from Go's content sniffing; ours names the file and the problem without it.
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("c.tgz"), "this is not gzip\n").expect("file");
    let message = template(dir.path(), "c.tgz", Vec::new()).expect_err("refused");
    assert_eq!(
        message,
        format!(
            "file '{}' does not appear to be a gzipped archive",
            dir.path().join("c.tgz").display()
        )
    );
}

#[test]
fn chart_yaml_bad_field() {
    let dir = chart(&[
        ("templates/cm.yaml", "a: 1\n"),
        (
            "Chart.yaml",
            "apiVersion: v2\nname: c\nversion: not-a-version\n",
        ),
    ]);
    assert_eq!(
        error(dir.path(), Vec::new()),
        "validation: chart.metadata.version \"not-a-version\" is invalid"
    );
}

#[test]
fn chart_yaml_not_yaml() {
    let dir = chart(&[
        ("templates/cm.yaml", "a: 1\n"),
        ("Chart.yaml", "apiVersion: v2\nname: [c\nversion: 0.1.0\n"),
    ]);
    assert_eq!(
        error(dir.path(), Vec::new()),
        "cannot load Chart.yaml: error converting YAML to JSON: yaml: line 2: did not find expected ',' or ']'"
    );
}

#[test]
fn chart_yaml_missing() {
    let dir = chart(&[("templates/cm.yaml", "a: 1\n")]);
    std::fs::remove_file(dir.path().join("c/Chart.yaml")).expect("remove");
    assert_eq!(error(dir.path(), Vec::new()), "Chart.yaml file is missing");
}

/// Helm's render repeats the include chain a thousand times in its message; the start and
/// the end are what matter: the template and line of the first call, and the limit.
#[test]
fn recursive_include() {
    let message = template_error(
        "{{- define \"loop\" }}{{ include \"loop\" . }}{{ end }}\na: {{ include \"loop\" . }}\n",
    );
    assert!(
        message.starts_with(
            "template: c/templates/cm.yaml:2:6: executing \"c/templates/cm.yaml\" at <include \"loop\" .>: error calling include: template: c/templates/cm.yaml:1:23: executing \"loop\" at <include \"loop\" .>: error calling include: "
        ),
        "{message}"
    );
    assert!(
        message.ends_with(
            "rendering template has a nested reference name: loop: unable to execute template"
        ),
        "{}",
        tail(&message)
    );
}

/// The same render on a thread with a 2 MiB stack: the engine's own bound (and its stack
/// growth) keep it from overflowing.
#[test]
fn recursive_include_small_stack() {
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            template_error(
                "{{- define \"loop\" }}{{ include \"loop\" . }}{{ end }}\na: {{ include \"loop\" . }}\n",
            )
        })
        .expect("a thread");
    let message = handle.join().expect("no panic, no overflow");
    assert!(
        message.starts_with("template: c/templates/cm.yaml:2:6: "),
        "{message}"
    );
}

#[test]
fn recursive_tpl() {
    // Helm overflows its goroutine stack here (`fatal error: stack overflow`); ours stops at
    // the same depth as `include` and names the template and position of the first call.
    let dir = chart(&[
        ("templates/cm.yaml", "a: {{ tpl .Values.t . }}\n"),
        ("values.yaml", "t: \"{{ tpl .Values.t . }}\"\n"),
    ]);
    let message = error(dir.path(), Vec::new());
    assert!(
        message.starts_with("template: c/templates/cm.yaml:1:6: executing \"c/templates/cm.yaml\" at <tpl .Values.t .>: error calling tpl: "),
        "{message}"
    );
    assert!(
        message.ends_with(
            "error calling tpl: error during tpl function execution for \"{{ tpl .Values.t . }}\": exceeded maximum template depth (1000)"
        ),
        "{}",
        tail(&message)
    );
}

#[test]
fn recursive_template() {
    // Helm v4's reformatted Go error, word for word, but for the limit: Go allows 100000
    // nested `{{template}}` calls, ours 10000 (`MAX_TEMPLATE_DEPTH`), enough for any real
    // chart and a bound on memory and time for a hostile one.
    assert_eq!(
        template_error(
            "{{- define \"self\" }}x{{ template \"self\" . }}{{ end }}\na: {{ template \"self\" . }}\n"
        ),
        "c/templates/cm.yaml:1:33\n  executing \"self\" at <{{template \"self\" .}}>:\n    exceeded maximum template depth (10000)"
    );
}

#[test]
fn huge_repeat() {
    // Helm runs out of memory (`fatal error: runtime: out of memory`); ours refuses.
    assert_eq!(
        template_error("a: {{ repeat 100000000000 \"x\" | len }}\n"),
        "template: c/templates/cm.yaml:1:6: executing \"c/templates/cm.yaml\" at <repeat 100000000000 \"x\">: error calling repeat: repeat: the result would be over the 64 MiB limit"
    );
}

#[test]
fn huge_until() {
    // Helm runs out of memory; ours refuses.
    assert_eq!(
        template_error("a: {{ until 100000000000 | len }}\n"),
        "template: c/templates/cm.yaml:1:6: executing \"c/templates/cm.yaml\" at <until 100000000000>: error calling until: refusing to build a list of 100000000000 numbers (the limit is 10000000)"
    );
}

#[test]
fn nested_ranges_bounded() {
    // Helm has no bound and runs for hours on this (10^10 iterations); ours stops after
    // `MAX_STEPS` walked lists, naming the template and the loop.
    let message =
        template_error("{{- range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}\n");
    // The same form as Helm v4 gives Go's template-depth error (see `recursive_template`).
    assert_eq!(
        message,
        "c/templates/cm.yaml:1:40\n  executing \"c/templates/cm.yaml\" at <100000>:\n    exceeded maximum template execution steps (10000000)"
    );
}

#[test]
fn files_get_outside_chart() {
    // Helm's `.Files` only holds the chart's own files: both paths give "".
    let dir = chart(&[(
        "templates/cm.yaml",
        "a: {{ .Files.Get \"../../etc/passwd\" | quote }}\nb: {{ .Files.Get \"/etc/passwd\" | quote }}\n",
    )]);
    let out = template(dir.path(), "c", Vec::new()).expect("renders");
    assert_eq!(
        out,
        "---\n# Source: c/templates/cm.yaml\na: \"\"\nb: \"\"\n"
    );
}

#[cfg(unix)]
#[test]
fn symlink_out_of_directory_chart() {
    // Helm follows the link and puts the host's file into `.Files` (logging "found symbolic
    // link in path"); the issue asks that `.Files` stay inside the chart, so ours refuses
    // the chart, naming the link.
    let dir = chart(&[(
        "templates/cm.yaml",
        "a: {{ .Files.Get \"leak\" | quote }}\n",
    )]);
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "host secret\n").expect("file");
    std::os::unix::fs::symlink(&secret, dir.path().join("c/leak")).expect("symlink");
    assert_eq!(
        error(dir.path(), Vec::new()),
        "leak: the link points outside the chart directory"
    );
}

#[cfg(unix)]
#[test]
fn ignored_symlink_out_of_directory_chart() {
    // What `.helmignore` leaves out is never read: Helm loads this chart, and so do we.
    let dir = chart(&[
        (
            "templates/cm.yaml",
            "a: {{ .Files.Get \"leak\" | quote }}\n",
        ),
        (".helmignore", "leak\n"),
    ]);
    std::os::unix::fs::symlink(dir.path(), dir.path().join("c/leak")).expect("symlink");
    assert_eq!(
        template(dir.path(), "c", Vec::new()).expect("renders"),
        "---\n# Source: c/templates/cm.yaml\na: \"\"\n"
    );
}

#[test]
fn set_syntax_error() {
    // The oracle's `set set a` gives "key \"a\" has no value"; `helm template` wraps it.
    let dir = chart(&[("templates/cm.yaml", "a: 1\n")]);
    assert_eq!(
        error(dir.path(), vec![ValueSource::Set("a".into())]),
        "failed parsing --set data: key \"a\" has no value"
    );
}

#[test]
fn values_file_not_yaml() {
    // `helm template -f bad.yaml`: the file named, then the YAML reader's error (the oracle's
    // `fromYaml` on the same text gives the same reader error).
    let dir = chart(&[
        ("templates/cm.yaml", "a: 1\n"),
        ("../bad.yaml", "a: [1, 2\nb: : :\n"),
    ]);
    assert_eq!(
        error(dir.path(), vec![ValueSource::File("bad.yaml".into())]),
        "failed to parse bad.yaml: error converting YAML to JSON: yaml: line 1: did not find expected ',' or ']'"
    );
}

/// Runs `f` on a thread with a 2 MiB stack (the size of a Rust thread by default, and less
/// than Go's 1 GiB): deep input must be refused or handled without overflowing it.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("a thread")
        .join()
        .expect("no panic, no overflow")
}

#[test]
fn deep_recursion_small_stack() {
    let tpl = on_small_stack(|| {
        let dir = chart(&[
            ("templates/cm.yaml", "a: {{ tpl .Values.t . }}\n"),
            ("values.yaml", "t: \"{{ tpl .Values.t . }}\"\n"),
        ]);
        error(dir.path(), Vec::new())
    });
    assert!(
        tpl.ends_with("exceeded maximum template depth (1000)"),
        "{}",
        tail(&tpl)
    );
    let template = on_small_stack(|| {
        template_error(
            "{{- define \"self\" }}x{{ template \"self\" . }}{{ end }}\na: {{ template \"self\" . }}\n",
        )
    });
    assert!(
        template.ends_with("exceeded maximum template depth (10000)"),
        "{template}"
    );
}

#[test]
fn deep_nesting_small_stack() {
    // A values file nested 100,000 deep, and a template nesting 20,000 `if`s: refused with
    // the file or template named, on a small stack.
    let values = on_small_stack(|| {
        let dir = chart(&[("templates/cm.yaml", "a: 1\n")]);
        let deep = format!("a: {}\n", "[".repeat(100_000));
        std::fs::write(dir.path().join("deep.yaml"), deep).expect("values file");
        error(dir.path(), vec![ValueSource::File("deep.yaml".into())])
    });
    assert!(
        values.starts_with("failed to parse deep.yaml: "),
        "{values}"
    );
    let ifs = on_small_stack(|| {
        template_error(&format!(
            "{}{}",
            "{{ if 1 }}".repeat(20_000),
            "{{ end }}".repeat(20_000)
        ))
    });
    assert!(ifs.contains("c/templates/cm.yaml:1"), "{}", tail(&ifs));
    assert!(
        ifs.contains("nests deeper than 10000 levels"),
        "{}",
        tail(&ifs)
    );
}

#[test]
fn archive_with_link_entry() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(CHART_YAML.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, "c/Chart.yaml", CHART_YAML.as_bytes())
        .expect("entry");
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_size(0);
    tar.append_link(&mut link, "c/templates/leak.yaml", "/etc/passwd")
        .expect("link");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar.into_inner().expect("tar")).expect("gzip");
    std::fs::write(dir.path().join("c.tgz"), gz.finish().expect("gzip")).expect("archive");
    // Helm keeps a link entry as an empty file; a chart needs none, so ours refuses it,
    // naming the entry.
    assert_eq!(
        template(dir.path(), "c.tgz", Vec::new()).expect_err("refused"),
        "chart archive entry \"c/templates/leak.yaml\" is a link, which charts may not contain"
    );
}

/// The last 300 characters of a long message.
fn tail(message: &str) -> &str {
    let start = message
        .char_indices()
        .map(|(i, _)| i)
        .find(|i| message.len() - i <= 300)
        .unwrap_or(0);
    &message[start..]
}
