//! The list, dict, math, reflection and default functions run through the template engine and
//! compared with what Helm's SDK rendered for the same templates: 500 generated expressions
//! (seeded), nested calls over literals and YAML values, and chains of merges.

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::funcs;
use crate::template::{Env, Set};
use crate::value::Value;

/// `#` comments, then the values (JSON) on one line, then `TEMPLATE<TAB>EXPECTED` lines.
const CASES: &str = include_str!("testdata/oracle_cases.tsv");

const NAME: &str = "t/templates/t.yaml";

/// Renders `template` with fresh values, Helm's way (`<no value>` printed as nothing).
fn render(
    funcs: &Rc<crate::template::FuncMap>,
    template: &str,
    values: &serde_json::Value,
) -> Result<String, String> {
    let data = Value::map(BTreeMap::from([(
        "Values".to_string(),
        Value::from_json_floats(values),
    )]));
    let mut set = Set::new(Rc::clone(funcs));
    set.parse(NAME, template)
        .and_then(|()| set.execute(NAME, data, &mut Env::fixed(1, jiff::Zoned::now())))
        .map(|text| text.replace("<no value>", ""))
        .map_err(|e| e.message)
}

#[test]
fn generated_expressions_render_as_helm_renders_them() {
    let funcs = Rc::new(funcs::helm());
    let mut lines = CASES.lines().filter(|line| !line.starts_with('#'));
    let values: serde_json::Value =
        serde_json::from_str(lines.next().expect("a values line")).expect("values are JSON");
    let mut failures = Vec::new();
    let mut count = 0;
    for line in lines {
        let (template, expected) = line.split_once('\t').expect("TEMPLATE<TAB>EXPECTED");
        count += 1;
        let result = render(&funcs, template, &values);
        let matches = match (expected.strip_prefix('!'), &result) {
            (None, Ok(text)) => {
                serde_json::from_str::<String>(expected).ok().as_ref() == Some(text)
            }
            // Go fails before the call (a wrong argument type); the wording is the engine's.
            (Some(""), Err(_)) => true,
            (Some(tail), Err(message)) => message.ends_with(&format!("error calling {tail}")),
            _ => false,
        };
        if !matches {
            failures.push(format!(
                "{template}\n    helm: {expected}\n    ours: {result:?}"
            ));
        }
    }
    assert!(count >= 500, "only {count} cases read");
    assert!(
        failures.is_empty(),
        "{} of {count} cases differ from Helm:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
