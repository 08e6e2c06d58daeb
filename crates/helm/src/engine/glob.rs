//! Glob patterns as Helm's `.Files.Glob` reads them (the `gobwas/glob` syntax with `/` as the
//! separator): `*` within a path segment, `**` across segments, `?`, classes `[a-z]`/`[!abc]`,
//! alternatives `{a,b}` and `\` escapes. A pattern that does not compile matches every file, as
//! in Helm, which falls back to `**`.

/// How many alternatives a pattern may expand to; past this the pattern is treated as invalid
/// (and so matches everything, as any invalid pattern does) instead of growing without bound.
const MAX_ALTERNATIVES: usize = 1024;

/// One step of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A character as written.
    Literal(char),
    /// `?`: one character that is not `/`.
    Single,
    /// `*`: any run of characters without `/`.
    Star,
    /// `**`: any run of characters.
    SuperStar,
    /// `[...]`: one character in (or, negated, not in) the ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// A compiled pattern: the alternatives it expands to, each a token sequence.
#[derive(Debug, Clone)]
pub struct Glob {
    /// `None` for a pattern that did not compile (it matches everything).
    alternatives: Option<Vec<Vec<Token>>>,
}

impl Glob {
    /// Compiles `pattern`; an invalid one matches every name.
    pub fn new(pattern: &str) -> Self {
        let chars: Vec<char> = pattern.chars().collect();
        let mut pos = 0;
        let alternatives = parse_sequence(&chars, &mut pos, false)
            .filter(|_| pos == chars.len())
            .filter(|alts| alts.len() <= MAX_ALTERNATIVES);
        Glob { alternatives }
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        let Some(alternatives) = &self.alternatives else {
            return true;
        };
        let chars: Vec<char> = name.chars().collect();
        alternatives
            .iter()
            .any(|tokens| match_tokens(tokens, &chars))
    }
}

/// Parses tokens up to the end (or, inside braces, up to an unnested `,` or `}`), returning
/// every expansion of the alternatives met on the way; `None` on a syntax error.
fn parse_sequence(chars: &[char], pos: &mut usize, in_braces: bool) -> Option<Vec<Vec<Token>>> {
    let mut expansions: Vec<Vec<Token>> = vec![Vec::new()];
    while let Some(&c) = chars.get(*pos) {
        let piece: Vec<Vec<Token>> = match c {
            ',' | '}' if in_braces => break,
            '*' => {
                *pos += 1;
                if chars.get(*pos) == Some(&'*') {
                    *pos += 1;
                    vec![vec![Token::SuperStar]]
                } else {
                    vec![vec![Token::Star]]
                }
            }
            '?' => {
                *pos += 1;
                vec![vec![Token::Single]]
            }
            '\\' => {
                let escaped = *chars.get(*pos + 1)?;
                *pos += 2;
                vec![vec![Token::Literal(escaped)]]
            }
            '[' => {
                *pos += 1;
                vec![vec![parse_class(chars, pos)?]]
            }
            '{' => {
                *pos += 1;
                let mut options = Vec::new();
                loop {
                    options.extend(parse_sequence(chars, pos, true)?);
                    if options.len() > MAX_ALTERNATIVES {
                        return None;
                    }
                    match chars.get(*pos) {
                        Some(',') => *pos += 1,
                        Some('}') => {
                            *pos += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
                options
            }
            other => {
                *pos += 1;
                vec![vec![Token::Literal(other)]]
            }
        };
        if piece.len() == 1 {
            let tokens = piece.into_iter().next().unwrap_or_default();
            for expansion in &mut expansions {
                expansion.extend(tokens.iter().cloned());
            }
        } else {
            if expansions.len().saturating_mul(piece.len()) > MAX_ALTERNATIVES {
                return None;
            }
            expansions = expansions
                .iter()
                .flat_map(|prefix| {
                    piece.iter().map(move |tail| {
                        let mut joined = prefix.clone();
                        joined.extend(tail.iter().cloned());
                        joined
                    })
                })
                .collect();
        }
    }
    Some(expansions)
}

/// Parses a class after its `[` up to and including the `]`.
fn parse_class(chars: &[char], pos: &mut usize) -> Option<Token> {
    let negated = chars.get(*pos) == Some(&'!');
    if negated {
        *pos += 1;
    }
    let mut ranges = Vec::new();
    loop {
        let c = *chars.get(*pos)?;
        *pos += 1;
        if c == ']' {
            break;
        }
        let low = if c == '\\' {
            let escaped = *chars.get(*pos)?;
            *pos += 1;
            escaped
        } else {
            c
        };
        if chars.get(*pos) == Some(&'-') && chars.get(*pos + 1).is_some_and(|&n| n != ']') {
            let high = *chars.get(*pos + 1)?;
            *pos += 2;
            if high < low {
                return None;
            }
            ranges.push((low, high));
        } else {
            ranges.push((low, low));
        }
    }
    if ranges.is_empty() {
        return None;
    }
    Some(Token::Class { negated, ranges })
}

/// Matches one token sequence against the whole name: the set of token positions reachable
/// after each character, so `*`-heavy patterns cost `tokens × characters`, never exponential.
fn match_tokens(tokens: &[Token], name: &[char]) -> bool {
    let n = tokens.len();
    // states[i]: the first i tokens have consumed the input read so far.
    let mut states = vec![false; n + 1];
    states[0] = true;
    close_stars(tokens, &mut states);
    for &c in name {
        let mut next = vec![false; n + 1];
        for (i, token) in tokens.iter().enumerate() {
            if !states[i] {
                continue;
            }
            match token {
                Token::Literal(l) => next[i + 1] |= *l == c,
                Token::Single => next[i + 1] |= c != '/',
                Token::Star => next[i] |= c != '/',
                Token::SuperStar => next[i] = true,
                Token::Class { negated, ranges } => {
                    let inside = ranges.iter().any(|&(low, high)| low <= c && c <= high);
                    next[i + 1] |= inside != *negated;
                }
            }
        }
        close_stars(tokens, &mut next);
        if !next.iter().any(|&s| s) {
            return false;
        }
        states = next;
    }
    states[n]
}

/// A star may match nothing: a state before a star also reaches the state after it.
fn close_stars(tokens: &[Token], states: &mut [bool]) {
    for (i, token) in tokens.iter().enumerate() {
        if states[i] && matches!(token, Token::Star | Token::SuperStar) {
            states[i + 1] = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Glob;

    fn count(pattern: &str) -> usize {
        // The file set of the oracle probe (Helm v4.2.3 answers in the comments).
        let names = [
            "bin.dat",
            "files/a.txt",
            "files/empty.txt",
            "files/sub/c.conf",
            "other/a.txt",
        ];
        let glob = Glob::new(pattern);
        names.iter().filter(|n| glob.matches(n)).count()
    }

    #[test]
    fn counts_match_helm() {
        assert_eq!(count("files/**"), 3);
        assert_eq!(count("**.txt"), 3);
        assert_eq!(count("["), 5);
        assert_eq!(count("{files,other}/a.txt"), 2);
        assert_eq!(count("files/?.txt"), 1);
        assert_eq!(count("*"), 1);
        assert_eq!(count("files/*"), 2);
    }

    #[test]
    fn classes_escapes_and_nesting() {
        assert!(Glob::new("a[0-9]").matches("a5"));
        assert!(!Glob::new("a[!0-9]").matches("a5"));
        assert!(Glob::new("a[!0-9]").matches("ax"));
        assert!(Glob::new(r"a\*").matches("a*"));
        assert!(!Glob::new(r"a\*").matches("ab"));
        assert!(Glob::new("{a,b{c,d}}x").matches("bdx"));
        assert!(Glob::new("dashboards/*.json").matches("dashboards/x.json"));
        assert!(!Glob::new("dashboards/*.json").matches("dashboards/sub/x.json"));
    }

    #[test]
    fn many_stars_stay_fast() {
        let pattern = "*a".repeat(200);
        let name = "a".repeat(5000) + "b";
        assert!(!Glob::new(&pattern).matches(&name));
    }
}
