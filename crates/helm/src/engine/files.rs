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
///
/// The files are the chart's own, shared rather than copied (a chart's `crds/` alone can be
/// megabytes, and most renders read few files or none): `order` indexes them by name, the
/// map's iteration order.
#[derive(Debug, Clone, Default)]
pub struct Files {
    files: Rc<Vec<crate::chart::File>>,
    /// Indexes into `files`, sorted by name, one per name (the last of equal names, as a
    /// map built in order keeps it).
    order: Rc<[usize]>,
}

impl Files {
    /// The files of one chart (copied).
    pub fn new(files: &[crate::chart::File]) -> Self {
        Files::shared(Rc::new(files.to_vec()))
    }

    /// The files of one chart, shared with the caller.
    pub fn shared(files: Rc<Vec<crate::chart::File>>) -> Self {
        let mut order: Vec<usize> = (0..files.len()).collect();
        // Stable: equal names stay in file order, and the last of them is kept.
        order.sort_by(|a, b| files[*a].name.cmp(&files[*b].name));
        let mut unique: Vec<usize> = Vec::with_capacity(order.len());
        for i in order {
            match unique.last_mut() {
                Some(last) if files[*last].name == files[i].name => *last = i,
                _ => unique.push(i),
            }
        }
        Files {
            files,
            order: unique.into(),
        }
    }

    /// The files by name, in name order.
    fn iter(&self) -> impl Iterator<Item = &crate::chart::File> {
        self.order.iter().map(|i| &self.files[*i])
    }

    fn find(&self, name: &str) -> Option<&[u8]> {
        let at = self
            .order
            .binary_search_by(|i| self.files[*i].name.as_str().cmp(name))
            .ok()?;
        Some(&self.files[self.order[at]].data)
    }

    fn bytes(&self, name: &str) -> Rc<[u8]> {
        Rc::from(self.find(name).unwrap_or_default())
    }

    /// `Get`: the file as a string. Go strings hold any bytes but [`Value::String`] holds UTF-8,
    /// so a file that is not UTF-8 comes back as `[]byte` (what `b64enc` and friends need).
    fn get(&self, name: &str) -> Value {
        let data = self.find(name).unwrap_or_default();
        match std::str::from_utf8(data) {
            Ok(text) => Value::str(text),
            Err(_) => Value::Bytes(Rc::from(data)),
        }
    }

    fn glob(&self, pattern: &str) -> Files {
        let glob = Glob::new(pattern);
        let order = self
            .order
            .iter()
            .copied()
            .filter(|i| glob.matches(&self.files[*i].name))
            .collect();
        Files {
            files: Rc::clone(&self.files),
            order,
        }
    }

    fn lines(&self, name: &str) -> Result<Value, String> {
        let Some(data) = self.find(name) else {
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
            .iter()
            .map(|file| {
                let name = &file.name;
                let base = name.rsplit('/').next().unwrap_or(name).to_string();
                let text = if encode {
                    base64::engine::general_purpose::STANDARD.encode(&file.data)
                } else {
                    String::from_utf8_lossy(&file.data).into_owned()
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
        for (i, file) in self.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            let _ = write!(
                out,
                "{}:{}",
                file.name,
                Value::Bytes(Rc::from(file.data.as_slice()))
            );
        }
        out.push(']');
        out
    }

    fn to_data(&self) -> Value {
        Value::map(
            self.iter()
                .map(|file| {
                    (
                        file.name.clone(),
                        Value::Bytes(Rc::from(file.data.as_slice())),
                    )
                })
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
    fn the_last_of_equal_names_is_kept() {
        let f = Files::new(&[
            File {
                name: "b".into(),
                data: b"1".to_vec(),
            },
            File {
                name: "a".into(),
                data: b"2".to_vec(),
            },
            File {
                name: "b".into(),
                data: b"3".to_vec(),
            },
        ]);
        assert_eq!(f.get("b").to_string(), "3");
        assert_eq!(f.format(), "map[a:[50] b:[51]]");
        assert_eq!(f.get("c").to_string(), "");
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
