//! Closers the editor already put after the cursor: a suggestion does not type them again.
//!
//! Editors auto-close brackets and quotes: typing `sum(` leaves `sum(|)` with the cursor before
//! the `)`. A model that sees only the text before the cursor writes that closer itself
//! (`x for x in xs)`), often followed by more of the line (`xs):`, `name));`,
//! `x) for x in rows]`). Inserted as it is, the line would close twice and the syntax guard
//! would drop the whole suggestion. [`trim`] removes the duplicate instead.

/// `suggestion` without the closers that `after` (the text after the cursor on its line)
/// already has, judged on the suggestion's first line:
///
/// 1. The line ends with the start of `after` (`xs)` before `)`, `0];` before `];`): that end
///    goes, unless it closes a bracket the line opened itself (`len(xs)` before `)` stays).
///    The other lines of a multi-line suggestion are kept.
/// 2. Else the line closes the bracket or string the cursor is in with the character `after`
///    starts with, then goes on (`xs):` before `)`, `{}".format(x))` before `")`): it is cut
///    before that closer, since what follows it belongs after the existing closer, not at the
///    cursor; so are the lines after it.
///
/// A cursor followed by a quote is taken to be inside a string that quote closes.
pub fn trim(suggestion: &str, after: &str) -> String {
    let tail = after.split('\n').next().unwrap_or("").trim_end();
    if tail.is_empty() || suggestion.is_empty() {
        return suggestion.to_owned();
    }
    let (first, rest) = match suggestion.find('\n') {
        Some(i) if suggestion[..i].ends_with('\r') => (&suggestion[..i - 1], &suggestion[i - 1..]),
        Some(i) => (&suggestion[..i], &suggestion[i..]),
        None => (suggestion, ""),
    };
    let line = first.trim_end();
    let in_string = tail.chars().next().filter(|c| is_quote(*c));

    // 1. The longest end of the line that `after` starts with.
    let overlap = (1..=tail.len().min(line.len()))
        .rev()
        .filter(|&k| tail.is_char_boundary(k) && line.ends_with(&tail[..k]))
        .find(|&k| scan(&line[..line.len() - k], in_string).net <= 0);
    if let Some(k) = overlap {
        let kept = line[..line.len() - k].trim_end();
        return if rest.is_empty() || kept.is_empty() { kept.to_owned() } else { format!("{kept}{rest}") };
    }

    // 2. The line closes what the cursor is in, with the closer `after` starts with.
    if let Some(at) = scan(line, in_string).first_close {
        if line[at..].chars().next() == tail.chars().next() {
            return line[..at].trim_end().to_owned();
        }
    }
    suggestion.to_owned()
}

/// A suggestion for a cursor that follows code and a space (`return "Hello, " + |`): the
/// line has its space already, so the suggestion's own leading spaces and tabs go
/// (` name + "!"` → `name + "!"`), as the closers the line has after the cursor do in [`trim`].
pub fn after_space(suggestion: &str) -> &str {
    suggestion.trim_start_matches([' ', '\t'])
}

/// What a line does to the brackets and string around the cursor.
struct Scan {
    /// Where it first closes a bracket (or the string) opened before the cursor.
    first_close: Option<usize>,
    /// Brackets it opens less brackets (and the string) it closes; strings it opens and closes
    /// itself count for nothing, nor does what is inside them.
    net: i32,
}

fn scan(line: &str, in_string: Option<char>) -> Scan {
    let mut net = 0i32;
    let mut first_close = None;
    // The string the scan is in, and whether it is the one around the cursor.
    let mut string = in_string.map(|q| (q, true));
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if let Some((quote, around_cursor)) = string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == quote {
                string = None;
                if around_cursor {
                    net -= 1;
                    first_close.get_or_insert(i);
                }
            }
            continue;
        }
        match c {
            '(' | '[' | '{' => net += 1,
            ')' | ']' | '}' => {
                net -= 1;
                if net < 0 {
                    first_close.get_or_insert(i);
                }
            }
            // A quote opens a string only when the line closes it too (`don't` does not), and
            // a Rust lifetime (`&'a`, `<'a>`) is no string.
            '\'' if line[..i].ends_with(['&', '<']) => {}
            q if is_quote(q) && closing_quote(&line[i + 1..], q) => string = Some((q, false)),
            _ => {}
        }
    }
    Scan { first_close, net }
}

fn is_quote(c: char) -> bool {
    matches!(c, '"' | '\'' | '`')
}

/// Whether `rest` holds an unescaped `quote`.
fn closing_quote(rest: &str, quote: char) -> bool {
    let mut escaped = false;
    for c in rest.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            _ if c == quote => return true,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::trim;

    /// `(line with | at the cursor, suggestion) → suggestion as inserted`, for each case.
    fn check(cases: &[(&str, &str, &str)]) {
        for (line, suggestion, expected) in cases {
            let after = &line[line.find('|').expect("cursor") + 1..];
            assert_eq!(trim(suggestion, after), *expected, "{line} ← {suggestion:?}");
        }
    }

    #[test]
    fn python_closers_typed_again_are_dropped() {
        check(&[
            ("total = sum(|)", "x for x in xs)", "x for x in xs"),
            ("total = sum(|)", "x for x in xs if isinstance(x, list))", "x for x in xs if isinstance(x, list)"),
            // the line's own brackets stay
            ("total = sum(|)", "len(xs)", "len(xs)"),
            ("total = sum(|)", "f(x) for x in xs)", "f(x) for x in xs"),
            // closers and what the line already has after them
            ("if any(|):", "row in rows for row in data):", "row in rows for row in data"),
            // the model goes on past the closer: cut before it
            ("if any(|)", "x > 0 for x in xs):", "x > 0 for x in xs"),
            ("out = [str(|)]", "x) for x in rows]", "x"),
            ("out = [f(|)]", "x)]", "x"),
            ("out = [f(|)]", "x)", "x"),
            ("d = {|}", "\"a\": 1}", "\"a\": 1"),
            // strings
            ("print(\"|\")", "Hello, my name is {}.{}\".format(name))", "Hello, my name is {}.{}"),
            ("print(\"|\")", "Hello\")", "Hello"),
            ("print('|')", "it's here')", "it's here"),
            ("print(\"|\")", "say \\\"hi\\\" (twice)\")", "say \\\"hi\\\" (twice)"),
            ("s = \"|\"", "a\" + b", "a"),
            // the line ends as the text after the cursor starts: that end goes, whatever precedes it
            ("print(\"|\")", "a\", \"b\")", "a\", \"b"),
            // nothing to trim
            ("total = sum(|)", "x for x in xs", "x for x in xs"),
            ("total = sum(|)  # all", "x)", "x"),
            ("x = foo(|, b)", "a", "a"),
            ("x = foo(|, b)", "a, b)", "a"),
        ]);
    }

    #[test]
    fn rust_and_javascript_closers() {
        check(&[
            ("let v = vec![|];", "0];", "0"),
            ("let v = vec![|];", "1, 2, 3]", "1, 2, 3"),
            ("let s = String::from(|)", "\"hi\");", "\"hi\""),
            ("let n = f(g(|));", "x));", "x"),
            ("let n = f(g(|));", "x), y);", "x"),
            ("fn f<'a>(x: &'a str) -> usize { x.len(|) }", "));", ""),
            ("fn f<'a>(|)", "x: &'a str)", "x: &'a str"),
            ("fn f<'a>(|) {}", "x: &'a str) -> &'a str {", "x: &'a str"),
            ("console.log(|)", "`${x} + ${y} = ${z * x})`);", "`${x} + ${y} = ${z * x})`"),
            ("const m = {|}", "a: 1, b: [2, 3] };", "a: 1, b: [2, 3]"),
            ("foo(|)", "function () { return 1; })", "function () { return 1; }"),
            ("el.on('click', (|) => {", "e)", "e"),
            ("const s = `|`;", "${a}-${b}`;", "${a}-${b}"),
        ]);
    }

    #[test]
    fn multi_line_suggestions_keep_their_block_only_when_the_first_line_ends_with_the_closers() {
        assert_eq!(trim("x, y)\n    return z", ")\n"), "x, y\n    return z");
        assert_eq!(trim("x, y)]\r\n    return z", ")]"), "x, y\r\n    return z");
        assert_eq!(trim("x, y):\n    return z", ")"), "x, y");
        assert_eq!(trim("x, y\n    z)", ")"), "x, y\n    z)");
    }

    #[test]
    fn a_space_the_line_has_before_the_cursor_is_dropped() {
        use super::after_space;
        assert_eq!(after_space(" name + \"!\""), "name + \"!\"");
        assert_eq!(after_space("\t x"), "x");
        assert_eq!(after_space("x  y"), "x  y");
        assert_eq!(after_space("\n    y"), "\n    y");
    }

    #[test]
    fn no_text_after_the_cursor_changes_nothing() {
        assert_eq!(trim("x)", ""), "x)");
        assert_eq!(trim("x)", "\nfoo)"), "x)");
        assert_eq!(trim("", ")"), "");
    }
}
