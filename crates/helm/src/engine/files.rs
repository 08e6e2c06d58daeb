//! `.Files`: a chart's non-template files, with Helm's methods (`Get`, `GetBytes`, `Glob`,
//! `Lines`, `AsConfig`, `AsSecrets`).
//!
//! Only the chart's own files are reachable: names are looked up in the chart's file list, never
//! on a file system, so `../` in a name simply finds nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

use base64::Engine as _;

use super::glob::Glob;
use crate::value::{Object, Value};

/// Helm's `engine.files`: a map from path (relative to the chart root) to contents.
#[derive(Debug, Clone, Default)]
pub struct Files {
    files: Rc<BTreeMap<String, Rc<[u8]>>>,
}

impl Files {
    /// The files of one chart.
    pub fn new(files: &[crate::chart::File]) -> Self {
        let map = files
            .iter()
            .map(|f| (f.name.clone(), Rc::from(f.data.as_slice())))
            .collect();
        Files {
            files: Rc::new(map),
        }
    }

    fn bytes(&self, name: &str) -> Rc<[u8]> {
        self.files
            .get(name)
            .cloned()
            .unwrap_or_else(|| Rc::from(&[][..]))
    }

    /// `Get`: the file as a string. Go strings hold any bytes but [`Value::String`] holds UTF-8,
    /// so a file that is not UTF-8 comes back as `[]byte` (what `b64enc` and friends need).
    fn get(&self, name: &str) -> Value {
        let data = self.bytes(name);
        match std::str::from_utf8(&data) {
            Ok(text) => Value::str(text),
            Err(_) => Value::Bytes(data),
        }
    }

    fn glob(&self, pattern: &str) -> Files {
        let glob = Glob::new(pattern);
        let map = self
            .files
            .iter()
            .filter(|(name, _)| glob.matches(name))
            .map(|(name, data)| (name.clone(), Rc::clone(data)))
            .collect();
        Files {
            files: Rc::new(map),
        }
    }

    fn lines(&self, name: &str) -> Result<Value, String> {
        let Some(data) = self.files.get(name) else {
            return Ok(Value::string_list(Vec::<String>::new()));
        };
        // Helm v4.2.3 indexes the last byte of the file unguarded; an empty file makes the
        // method panic, which Go reports as this runtime error.
        if data.is_empty() {
            return Err("runtime error: index out of range [-1]".into());
        }
        let text = String::from_utf8_lossy(data);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        Ok(Value::string_list(text.split('\n')))
    }

    /// `AsConfig`/`AsSecrets`: base names to (encoded) contents as YAML. Two files with the
    /// same base name collide; Go's map order picks the survivor at random, here the later
    /// path wins.
    fn as_yaml(&self, encode: bool) -> Value {
        let map: BTreeMap<String, Value> = self
            .files
            .iter()
            .map(|(name, data)| {
                let base = name.rsplit('/').next().unwrap_or(name).to_string();
                let text = if encode {
                    base64::engine::general_purpose::STANDARD.encode(data)
                } else {
                    String::from_utf8_lossy(data).into_owned()
                };
                (base, Value::str(text))
            })
            .collect();
        // Helm's toYAML: the marshalled text without its final newline, "" on failure.
        let yaml = crate::yaml::to_yaml(&Value::map(map)).unwrap_or_default();
        Value::str(yaml.strip_suffix('\n').unwrap_or(&yaml))
    }
}

/// The methods of `engine.files`.
const METHODS: &[&str] = &["Get", "GetBytes", "Glob", "Lines", "AsConfig", "AsSecrets"];

fn one_string<'a>(method: &str, args: &'a [Value]) -> Result<&'a str, String> {
    match args {
        [Value::String(s)] => Ok(s),
        [other] => Err(format!("expected string; found {other}")),
        _ => Err(format!(
            "wrong number of args for {method}: want 1 got {}",
            args.len()
        )),
    }
}

impl Object for Files {
    fn type_name(&self) -> String {
        "engine.files".into()
    }

    fn kind_name(&self) -> &'static str {
        "map"
    }

    fn field(&self, name: &str) -> Option<Value> {
        // A map type: `.Files.x` is the entry, or the zero `[]byte` — except for the method
        // names, which Go resolves as methods first.
        if METHODS.contains(&name) {
            return None;
        }
        Some(Value::Bytes(self.bytes(name)))
    }

    fn method(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        let result = match name {
            "Get" => one_string(name, args).map(|n| self.get(n)),
            "GetBytes" => one_string(name, args).map(|n| Value::Bytes(self.bytes(n))),
            "Glob" => one_string(name, args).map(|p| Value::Object(Rc::new(self.glob(p)))),
            "Lines" => one_string(name, args).and_then(|n| self.lines(n)),
            "AsConfig" | "AsSecrets" if !args.is_empty() => Err(format!(
                "wrong number of args for {name}: want 0 got {}",
                args.len()
            )),
            "AsConfig" => Ok(self.as_yaml(false)),
            "AsSecrets" => Ok(self.as_yaml(true)),
            _ => return None,
        };
        Some(result)
    }

    fn format(&self) -> String {
        let mut out = String::from("map[");
        for (i, (name, data)) in self.files.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            let _ = write!(out, "{name}:{}", Value::Bytes(Rc::clone(data)));
        }
        out.push(']');
        out
    }

    fn to_data(&self) -> Value {
        Value::map(
            self.files
                .iter()
                .map(|(name, data)| (name.clone(), Value::Bytes(Rc::clone(data))))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::File;

    fn files() -> Files {
        Files::new(&[
            File {
                name: "files/a.txt".into(),
                data: b"A\nB\n".to_vec(),
            },
            File {
                name: "files/empty.txt".into(),
                data: Vec::new(),
            },
            File {
                name: "bin.dat".into(),
                data: vec![0xff, 0x00],
            },
        ])
    }

    fn call(f: &Files, name: &str, args: &[Value]) -> Result<Value, String> {
        f.method(name, args).expect("method exists")
    }

    #[test]
    fn get_lines_and_glob_as_helm() {
        let f = files();
        let a = Value::str("files/a.txt");
        assert_eq!(
            call(&f, "Get", std::slice::from_ref(&a))
                .unwrap()
                .to_string(),
            "A\nB\n"
        );
        assert_eq!(
            call(&f, "Get", &[Value::str("nope")]).unwrap().to_string(),
            ""
        );
        assert_eq!(
            call(&f, "GetBytes", std::slice::from_ref(&a))
                .unwrap()
                .to_string(),
            "[65 10 66 10]"
        );
        let lines = call(&f, "Lines", &[a]).unwrap();
        assert_eq!(lines.to_string(), "[A B]");
        assert_eq!(lines.type_name(), "[]string");
        assert_eq!(
            call(&f, "Lines", &[Value::str("files/empty.txt")]).unwrap_err(),
            "runtime error: index out of range [-1]"
        );
        let glob = call(&f, "Glob", &[Value::str("files/*")]).unwrap();
        assert_eq!(
            glob.to_string(),
            "map[files/a.txt:[65 10 66 10] files/empty.txt:[]]"
        );
        assert_eq!(glob.type_name(), "engine.files");
        assert!(matches!(
            call(&f, "Get", &[Value::str("bin.dat")]).unwrap(),
            Value::Bytes(_)
        ));
        assert_eq!(
            call(&f, "Get", &[Value::Int(1)]).unwrap_err(),
            "expected string; found 1"
        );
        assert!(f.method("Nope", &[]).is_none());
    }

    #[test]
    fn as_config_and_as_secrets_as_helm() {
        let f = Files::new(&[
            File {
                name: "files/a.yaml".into(),
                data: b"a: 1\n".to_vec(),
            },
            File {
                name: "files/b.txt".into(),
                data: b"b\n".to_vec(),
            },
        ]);
        assert_eq!(
            call(&f, "AsConfig", &[]).unwrap().to_string(),
            "a.yaml: |\n  a: 1\nb.txt: |\n  b"
        );
        assert_eq!(
            call(&f, "AsSecrets", &[]).unwrap().to_string(),
            "a.yaml: YTogMQo=\nb.txt: Ygo="
        );
        let none = call(&f, "Glob", &[Value::str("nothing")]).unwrap();
        let Value::Object(none) = none else {
            panic!("an object")
        };
        assert_eq!(
            none.method("AsConfig", &[]).unwrap().unwrap().to_string(),
            "{}"
        );
    }
}
