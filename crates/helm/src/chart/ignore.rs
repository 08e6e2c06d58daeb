//! `.helmignore` as Helm reads it.
//!
//! Helm's rules are not git's: patterns are Go `filepath.Match` globs (no `**`), a pattern with a
//! `/` matches the whole path and one without matches the base name, a leading `/` anchors, a
//! trailing `/` matches directories only — and a negated rule that does *not* match a path
//! ignores it. Charts are packaged with these exact semantics, so they are reproduced here rather
//! than approximated with a gitignore matcher.

/// One rule of a `.helmignore` file.
#[derive(Debug, Clone)]
struct Pattern {
    glob: String,
    negate: bool,
    must_dir: bool,
    /// How the glob is applied: to the whole path or to its last element.
    whole_path: bool,
}

/// The rules of a `.helmignore` file plus Helm's default (`templates/.?*`).
///
/// Public for callers walking a chart directory on another file system than the disk (see
/// [`crate::chart::load_dir_files`]): they skip what [`Rules::ignored`] says, as Helm's walk does.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    patterns: Vec<Pattern>,
}

impl Rules {
    /// Parses a `.helmignore` file and appends Helm's defaults.
    ///
    /// # Errors
    ///
    /// A `**` pattern or a malformed glob, in Helm's words.
    pub fn parse(text: &str) -> Result<Rules, String> {
        let mut rules = Rules::default();
        for line in text.lines() {
            rules.add(line)?;
        }
        rules.add("templates/.?*")?;
        Ok(rules)
    }

    fn add(&mut self, line: &str) -> Result<(), String> {
        let mut rule = line.trim();
        if rule.is_empty() || rule.starts_with('#') {
            return Ok(());
        }
        if rule.contains("**") {
            return Err("double-star (**) syntax is not supported".into());
        }
        let negate = if let Some(rest) = rule.strip_prefix('!') {
            rule = rest;
            true
        } else {
            false
        };
        let must_dir = if let Some(rest) = rule.strip_suffix('/') {
            rule = rest;
            true
        } else {
            false
        };
        if glob_match(rule, "abc").is_err() {
            return Err(format!("syntax error in pattern: {rule}"));
        }
        let (glob, whole_path) = if let Some(anchored) = rule.strip_prefix('/') {
            (anchored.to_string(), true)
        } else {
            (rule.to_string(), rule.contains('/'))
        };
        self.patterns.push(Pattern {
            glob,
            negate,
            must_dir,
            whole_path,
        });
        Ok(())
    }

    /// Whether `path` (relative to the chart root, `/`-separated) is ignored.
    pub fn ignored(&self, path: &str, is_dir: bool) -> bool {
        if path.is_empty() || path == "." || path == "./" {
            return false;
        }
        let base = path.rsplit('/').next().unwrap_or(path);
        for pattern in &self.patterns {
            if !pattern.negate && pattern.must_dir && !is_dir {
                continue;
            }
            let subject = if pattern.whole_path { path } else { base };
            let matched = glob_match(&pattern.glob, subject).unwrap_or(false);
            if pattern.negate {
                // Helm's quirk: a negation ignores whatever it does not match.
                if pattern.must_dir && !is_dir {
                    return true;
                }
                if !matched {
                    return true;
                }
                continue;
            }
            if pattern.must_dir && !is_dir {
                continue;
            }
            if matched {
                return true;
            }
        }
        false
    }
}

/// Go's `filepath.Match` on `/`-separated paths: `*`, `?`, `[...]` classes (with `^` negation
/// and ranges) and `\` escapes; `Err` for a malformed pattern.
pub(crate) fn glob_match(pattern: &str, name: &str) -> Result<bool, ()> {
    // The usual `.helmignore` lines, `name` and `*.ext`, without the general matcher's
    // allocations (every entry of a chart is matched against every line).
    let special = |c: char| matches!(c, '*' | '?' | '[' | '\\');
    if !pattern.contains(special) {
        return Ok(pattern == name);
    }
    if let Some(suffix) = pattern.strip_prefix('*')
        && !suffix.contains(special)
    {
        // `*` matches any run of characters but the separator.
        return Ok(name
            .strip_suffix(suffix)
            .is_some_and(|head| !head.contains('/')));
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Validate the whole pattern first, as Go reports a bad pattern even after a mismatch.
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '\\' => {
                if i + 1 >= p.len() {
                    return Err(());
                }
                i += 2;
            }
            '[' => i = class_end(&p, i)?,
            _ => i += 1,
        }
    }
    Ok(match_from(&p, &n))
}

/// The index after the class that starts at `start` (`[`).
fn class_end(p: &[char], start: usize) -> Result<usize, ()> {
    let mut i = start + 1;
    if p.get(i) == Some(&'^') {
        i += 1;
    }
    let mut first = true;
    loop {
        let c = *p.get(i).ok_or(())?;
        if c == ']' && !first {
            return Ok(i + 1);
        }
        if c == ']' {
            return Err(());
        }
        first = false;
        i = class_char_end(p, i)?;
        if p.get(i) == Some(&'-') {
            i = class_char_end(p, i + 1)?;
        }
    }
}

fn class_char_end(p: &[char], i: usize) -> Result<usize, ()> {
    match p.get(i) {
        None | Some('-' | ']') => Err(()),
        Some('\\') => {
            if i + 1 < p.len() {
                Ok(i + 2)
            } else {
                Err(())
            }
        }
        Some(_) => Ok(i + 1),
    }
}

fn class_char(p: &[char], i: usize) -> (char, usize) {
    if p[i] == '\\' {
        (p[i + 1], i + 2)
    } else {
        (p[i], i + 1)
    }
}

/// Whether the class at `start` matches `c`; the pattern is known to be well formed.
fn class_matches(p: &[char], start: usize, c: char) -> bool {
    let mut i = start + 1;
    let negated = p[i] == '^';
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while p[i] != ']' || first {
        first = false;
        let (lo, next) = class_char(p, i);
        i = next;
        let mut hi = lo;
        if p[i] == '-' {
            let (h, next) = class_char(p, i + 1);
            hi = h;
            i = next;
        }
        if lo <= c && c <= hi {
            matched = true;
        }
    }
    matched != negated
}

/// Iterative glob matching with one backtrack point for the last `*` (no separators crossed).
fn match_from(p: &[char], n: &[char]) -> bool {
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' if n[ni] != '/' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                '[' if n[ni] != '/' && class_matches(p, pi, n[ni]) => {
                    // The pattern was validated, so the class end exists.
                    pi = class_end(p, pi).unwrap_or(p.len());
                    ni += 1;
                    continue;
                }
                '\\' if p[pi + 1] == n[ni] => {
                    pi += 2;
                    ni += 1;
                    continue;
                }
                c if c != '?' && c != '[' && c != '\\' && c == n[ni] => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            // A star never swallows a separator.
            Some((sp, sn)) if n[sn] != '/' => {
                star = Some((sp, sn + 1));
                pi = sp + 1;
                ni = sn + 1;
            }
            _ => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_as_go() {
        assert_eq!(glob_match("*.txt", "a.txt"), Ok(true));
        assert_eq!(glob_match("*.txt", "d/a.txt"), Ok(false));
        assert_eq!(glob_match("*", ""), Ok(true));
        assert_eq!(glob_match("*", "a/b"), Ok(false));
        assert_eq!(glob_match("a.txt", "a.txt"), Ok(true));
        assert_eq!(glob_match("a.txt", "d/a.txt"), Ok(false));
        assert_eq!(glob_match("a?c", "abc"), Ok(true));
        assert_eq!(glob_match("[a-c]x", "bx"), Ok(true));
        assert_eq!(glob_match("[^a-c]x", "bx"), Ok(false));
        assert_eq!(glob_match("\\*", "*"), Ok(true));
        assert_eq!(glob_match("[", "a"), Err(()));
        assert_eq!(glob_match("templates/.?*", "templates/.x"), Ok(true));
        assert_eq!(glob_match("templates/.?*", "templates/."), Ok(false));
    }

    #[test]
    fn rules_as_helm() {
        let rules = Rules::parse("# c\n*.swp\n/ci/\ndocs/*.md\n.git/\n").expect("rules");
        assert!(rules.ignored("a/b.swp", false));
        assert!(rules.ignored("ci", true));
        assert!(!rules.ignored("x/ci", true));
        assert!(rules.ignored("docs/a.md", false));
        assert!(!rules.ignored("docs", true));
        assert!(rules.ignored(".git", true));
        assert!(rules.ignored("templates/.hidden", false));
        assert!(!rules.ignored("templates/a.yaml", false));
        // A negation ignores what it does not match.
        let rules = Rules::parse("!keep.txt\n").expect("rules");
        assert!(rules.ignored("other.txt", false));
        assert!(!rules.ignored("keep.txt", false));
        assert!(Rules::parse("a/**/b\n").is_err());
    }
}
