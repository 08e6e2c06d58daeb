//! Field paths built on the stack while walking a value, rendered only when needed.

use std::fmt;

/// A Kubernetes field path (`spec.containers[0].name`, `data[key]`) as a chain of stack frames.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Path<'a> {
    /// The node the walk started at.
    Root,
    /// `parent.name`
    Field(&'a Path<'a>, &'a str),
    /// `parent[index]`
    Index(&'a Path<'a>, usize),
    /// `parent[key]` (a map key, i.e. an additionalProperties entry).
    Key(&'a Path<'a>, &'a str),
}

impl Path<'_> {
    pub(crate) fn is_root(&self) -> bool {
        matches!(self, Path::Root)
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Field(parent, name) => {
                if parent.is_root() {
                    f.write_str(name)
                } else {
                    write!(f, "{parent}.{name}")
                }
            }
            Path::Index(parent, index) => write!(f, "{parent}[{index}]"),
            Path::Key(parent, key) => write!(f, "{parent}[{key}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Path;

    #[test]
    fn renders_kubernetes_style() {
        let spec = Path::Field(&Path::Root, "spec");
        let containers = Path::Field(&spec, "containers");
        let first = Path::Index(&containers, 0);
        let name = Path::Field(&first, "name");
        assert_eq!(name.to_string(), "spec.containers[0].name");
        let data = Path::Field(&Path::Root, "data");
        assert_eq!(Path::Key(&data, "app.conf").to_string(), "data[app.conf]");
        assert_eq!(Path::Root.to_string(), "");
    }
}
