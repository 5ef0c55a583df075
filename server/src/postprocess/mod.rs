//! Post-processing: when a streaming suggestion is complete, and how it is cleaned up.
//!
//! Pure text rules, no model and no LSP. The model thread calls [`StopRule::check`] after each
//! token (as the prompt plan's stop predicate) to stop generating as early as possible; [`StopRule::finish`] then trims the result,
//! and [`syntax::keep_if_parse_not_worse`] checks it against the file's syntax tree.

pub mod closers;
pub mod syntax;

use crate::text::indent_width;

/// Whether `suggestion` adds nothing at a cursor followed by `after`: it is blank, only closes
/// brackets (`)`, `]);`), or only repeats what already follows the cursor.
pub fn redundant(suggestion: &str, after: &str) -> bool {
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    let s = squeeze(suggestion);
    if s.is_empty() || s.chars().all(|c| matches!(c, ')' | ']' | '}' | ';' | ',')) {
        return true;
    }
    // What follows the cursor, as far as the suggestion reaches.
    let ahead = squeeze(&after[..after.char_indices().nth(suggestion.len() * 2).map_or(after.len(), |(i, _)| i)]);
    ahead.starts_with(&s)
}


/// How much text a suggestion may span, decided from the cursor's surroundings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The cursor is inside a line that has code after it: complete to the end of this line.
    SingleLine,
    /// The cursor ends its line: a block may follow, as long as it stays indented at least
    /// `indent` columns and has no blank line.
    MultiLine { indent: usize },
    /// Only the token limit or the end of text ends it (`ghostline bench --cold-sizes`, which
    /// needs a fixed number of decoded tokens).
    Unbounded,
}

/// Where a suggestion must end, for one cursor position. Hashed for the model's suggestion
/// cache (`crate::prompt::PromptPlan::into_prompt`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StopRule {
    pub mode: Mode,
    /// Code after the cursor on its line (used to drop text the line already has).
    line_after: String,
    /// The cursor follows code and a space or tab: a suggestion does not type that space again.
    space_before: bool,
    /// The next non-blank line below the cursor, trimmed (a suggestion stops before repeating it).
    next_line: Option<String>,
    /// Text the generation must start with and that is not part of the suggestion: the line
    /// break and indentation left out of the prompt (see `Engine::draft`).
    lead: String,
    /// Blocks end with a closing brace: a suggestion stops before closing more than it opened.
    braces: bool,
    /// The text fills a hole between a call's parentheses (a next edit's arguments).
    arguments: Option<Arguments>,
}

/// What a hole between a call's parentheses takes ([`StopRule::arguments`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arguments {
    /// One argument: the text ends before a comma outside its own brackets.
    One,
    /// The whole argument list.
    List,
}

impl StopRule {
    /// `before` is the cursor's line up to the cursor, `after` everything after the cursor.
    pub fn for_cursor(before: &str, after: &str) -> Self {
        let line_after = after.split('\n').next().unwrap_or("").trim_end_matches('\r');
        let next_line = after
            .split('\n')
            .skip(1)
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_owned);
        let mode = if line_after.trim().is_empty() {
            Mode::MultiLine { indent: indent_width(before) }
        } else {
            Mode::SingleLine
        };
        let space_before = before.ends_with([' ', '\t']) && !before.trim().is_empty();
        StopRule { mode, line_after: line_after.to_owned(), space_before, next_line, lead: String::new(), braces: false, arguments: None }
    }

    /// Never stops on the text (see [`Mode::Unbounded`]).
    pub fn unbounded() -> Self {
        StopRule { mode: Mode::Unbounded, line_after: String::new(), space_before: false, next_line: None, lead: String::new(), braces: false, arguments: None }
    }

    /// Completes the current line only (the syntax tree says the cursor is mid-expression).
    pub fn single_line(mut self) -> Self {
        self.mode = Mode::SingleLine;
        self
    }

    /// For brace languages: a line that closes the block the suggestion started in ends it.
    pub fn with_braces(mut self) -> Self {
        self.braces = true;
        self
    }

    /// The text fills a hole between a call's parentheses: it ends before the first closer it
    /// did not open (the call's own `)` follows the hole) and, for [`Arguments::One`], before a
    /// comma outside its own brackets; and it may not end empty (the hole is there because the
    /// call needs something). A model that goes on past the call (`x) and y:`) is cut at the
    /// call's end, not at the line's.
    pub fn arguments(mut self, what: Arguments) -> Self {
        self.arguments = Some(what);
        self
    }

    /// Requires generated text to start with `lead`, which the suggestion then leaves out.
    /// More indentation after the lead is kept; anything else makes the suggestion empty.
    pub fn with_lead(mut self, lead: &str) -> Self {
        self.lead = lead.to_owned();
        self
    }

    /// The text the generation must start with (see [`StopRule::with_lead`]).
    pub fn lead(&self) -> &str {
        &self.lead
    }

    /// The lead the model is held to (`Prompt::lead`): one that holds a word part. A lead of a
    /// line break and indentation only is required but not forced: the model may leave a blank
    /// line empty (forcing it made worse suggestions, see the README's eval notes). In an
    /// argument hole every lead is forced: the hole may not stay empty, and a model that writes
    /// `x` where the rule requires ` x` would leave it so.
    pub fn forced_lead(&self) -> &str {
        if self.lead.trim().is_empty() && self.arguments.is_none() { "" } else { &self.lead }
    }

    /// Whether `text` (the generation so far) may not end here: the cursor ends its line, so
    /// nothing after it closes a bracket, and past the lead the text has opened one it has not
    /// closed. The model thread then takes the best token that is not an end token: a call cut
    /// right after its `(` is no suggestion (the syntax check drops what leaves brackets open),
    /// and the FIM test model ends there in 4 of 48 cross-file holes.
    ///
    /// Nor may it end inside a lead that holds part of a word (`Engine::draft` left the word the
    /// cursor is in out of the prompt): ending there throws away what the user has typed, while
    /// a model that holds the line complete can still end right after the word.
    pub fn unfinished(&self, text: &str) -> bool {
        let forced = self.forced_lead();
        if text.len() < forced.len() && forced.starts_with(text) {
            return true;
        }
        if self.arguments.is_some() && (self.lead.starts_with(text) || text.strip_prefix(self.lead.as_str()).is_some_and(|rest| rest.trim().is_empty())) {
            return true;
        }
        matches!(self.mode, Mode::MultiLine { .. }) && text.strip_prefix(self.lead.as_str()).is_some_and(|rest| open_brackets(rest) > 0)
    }

    /// Characters that may not begin the text past the lead while it is blank
    /// (`Prompt::blank_enders`). In an argument hole a line break, a closer and (one argument)
    /// a comma end it empty: the model's first token is one of them in 6 of 13 add-param call
    /// lines. Nor does an argument begin with `:`, `;`, `=`, `>` or `.` in any language the
    /// server parses (`::`, `..` and `...` do, and pass: `model::ends_blank`): a first token
    /// such as `.get(` or `:items(` continues the text before the hole, and leaves nothing once
    /// cut. Every backend refuses a token that starts with one there, as it refuses an end
    /// token while [`StopRule::unfinished`]. Empty for any other rule.
    pub fn blank_enders(&self) -> &'static str {
        match self.arguments {
            Some(Arguments::One) => "\n,)]}:;=>.",
            Some(Arguments::List) => "\n)]}:;=>.",
            None => "",
        }
    }

    /// Returns `Some(len)` once `text` (the generation so far) is complete: keep `text[..len]`.
    pub fn check(&self, text: &str) -> Option<usize> {
        match text.strip_prefix(self.lead.as_str()) {
            Some(rest) => self.cut(rest, false).map(|n| n + self.lead.len()),
            None if self.lead.starts_with(text) => None,
            None => Some(0),
        }
    }

    /// The final suggestion: lead removed, cut at the stop point, trailing whitespace removed,
    /// and neither the space before the cursor nor the closers the line already has after it
    /// repeated ([`closers::after_space`], [`closers::trim`]).
    pub fn finish(&self, text: &str) -> String {
        let Some(text) = text.strip_prefix(self.lead.as_str()) else {
            return String::new();
        };
        let end = self.cut(text, true).unwrap_or(text.len());
        let text = closers::trim(text[..end].trim_end(), &self.line_after);
        if self.space_before {
            closers::after_space(&text).to_owned()
        } else {
            text
        }
    }

    /// The byte length to keep, if `text` must stop. `at_end` treats the last line as complete.
    fn cut(&self, text: &str, at_end: bool) -> Option<usize> {
        if self.mode == Mode::Unbounded {
            return None;
        }
        let rule = self.rule_cut(text, at_end);
        match (rule, loop_cut(text)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// [`StopRule::cut`] by the cursor's surroundings alone.
    fn rule_cut(&self, text: &str, at_end: bool) -> Option<usize> {
        if let Some(what) = self.arguments {
            return argument_end(text, what);
        }
        match self.mode {
            Mode::Unbounded => None,
            Mode::SingleLine => text.find('\n'),
            Mode::MultiLine { indent } => {
                if let Some(cut) = self.braces.then(|| unbalanced_close(text)).flatten() {
                    return Some(cut);
                }
                let mut start = 0;
                for (i, line) in text.split('\n').enumerate() {
                    let line_start = start;
                    start += line.len() + 1;
                    if i == 0 {
                        continue;
                    }
                    let complete = start <= text.len() || at_end;
                    let content = line.trim();
                    // Cut before the '\n' that opened this line.
                    let stop = Some(line_start - 1);
                    if content.is_empty() {
                        if complete && start <= text.len() {
                            return stop; // a blank line ends the block
                        }
                        continue;
                    }
                    if indent_width(line) < indent {
                        return stop; // dedent below the cursor's block
                    }
                    if complete && self.next_line.as_deref() == Some(content) {
                        return stop; // the document already continues with this line
                    }
                }
                None
            }
        }
    }
}

/// Repeats that make a loop: at least this many copies of a block, covering at least
/// [`LOOP_MIN_BYTES`], of a block of at most [`LOOP_MAX_PERIOD`] bytes.
const LOOP_MIN_COPIES: usize = 3;
const LOOP_MIN_BYTES: usize = 32;
const LOOP_MAX_PERIOD: usize = 80;

/// Where a generation that has fallen into a loop is cut: `text` ends with the same block
/// (2 to [`LOOP_MAX_PERIOD`] bytes, holding a letter or digit) written [`LOOP_MIN_COPIES`]
/// times or more over [`LOOP_MIN_BYTES`] bytes or more (`{name: {name: {name: …`,
/// `, %d total attempts, %d total attempts, …`). What is kept is the lines before the one the
/// loop starts in: the line itself is the model's lost thread (one copy of `{name: ` would
/// still be a suggestion, and a wrong one), so a loop on the first line leaves no suggestion.
/// A few zeros in a row, a `# ----` rule or lines that differ in one name are no loop. A
/// greedy small model that starts such a loop inside a line never writes the line break that
/// would end it, and spent the whole token cap on it. The loop must reach the end of `text`:
/// checked after every token, it stops the generation as soon as the third copy (or the 32nd
/// byte) is written, and the same text always gives the same cut.
fn loop_cut(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let n = bytes.len();
    (2..=LOOP_MAX_PERIOD.min(n / LOOP_MIN_COPIES))
        .filter_map(|period| {
            // Trailing bytes equal to the byte one period before them.
            let repeated = (period..n).rev().take_while(|&i| bytes[i] == bytes[i - period]).count();
            let span = repeated + period;
            let is_loop = span >= LOOP_MIN_BYTES.max(LOOP_MIN_COPIES * period) && bytes[n - period..].iter().any(u8::is_ascii_alphanumeric);
            // Keep the lines before the one the loop starts in.
            is_loop.then(|| bytes[..n - span].iter().rposition(|&b| b == b'\n').unwrap_or(0))
        })
        .min()
}

/// Brackets `text` opened and has not closed yet, outside string literals on one line (a closer
/// of something opened before the text counts for nothing).
fn open_brackets(text: &str) -> usize {
    let mut depth = 0usize;
    let mut quote = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            Some(q) => {
                if c == '\\' && !escaped {
                    escaped = true;
                    continue;
                }
                if (c == q && !escaped) || c == '\n' {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' | '`' => quote = Some(c),
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        escaped = false;
    }
    depth
}

/// Where the text of an argument hole ends: before its first line break, closer it did not
/// open, or (one argument) comma outside its brackets; strings are skipped.
fn argument_end(text: &str, what: Arguments) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if c == '\\' && !escaped {
                escaped = true;
                continue;
            }
            if c == q && !escaped {
                quote = None;
            }
            escaped = false;
            if c != '\n' {
                continue;
            }
        }
        match c {
            '\n' => return Some(i),
            '"' | '\'' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => return Some(i),
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 && what == Arguments::One => return Some(i),
            _ => {}
        }
    }
    None
}

/// Where `text` first closes a bracket it did not open: the start of that line (before its
/// line break) when the closer leads its line, else the closer itself.
fn unbalanced_close(text: &str) -> Option<usize> {
    let mut depth = 0i32;
    let mut line_start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '\n' => line_start = i + 1,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth < 0 {
                    let leads = text[line_start..i].trim().is_empty();
                    return Some(if leads && line_start > 0 { line_start - 1 } else { i });
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(doc: &str) -> StopRule {
        let at = doc.find('|').expect("cursor marker");
        let before_line = doc[..at].rsplit('\n').next().unwrap();
        StopRule::for_cursor(before_line, &doc[at + 1..])
    }

    #[test]
    fn mid_line_stops_at_newline() {
        let r = rule("x = foo(|)\n");
        assert_eq!(r.mode, Mode::SingleLine);
        assert_eq!(r.check("a, b)\nprint(x)"), Some(5));
        assert_eq!(r.check("a, b"), None);
        // the `)` already on the line is not repeated
        assert_eq!(r.finish("a, b)\nprint(x)"), "a, b");
    }

    #[test]
    fn block_stops_at_blank_line() {
        let r = rule("def f(x):\n    |\n");
        assert_eq!(r.mode, Mode::MultiLine { indent: 4 });
        let text = "y = x * 2\n    return y\n\ndef g():\n";
        assert_eq!(r.check("y = x * 2\n    return y\n"), None);
        assert_eq!(r.finish(text), "y = x * 2\n    return y");
    }

    #[test]
    fn block_stops_at_dedent_as_soon_as_it_shows() {
        let r = rule("def f(x):\n    |\n");
        // the partial last line already has code at column 0
        assert_eq!(r.check("return x\nde"), Some(8));
        assert_eq!(r.finish("return x\nclass A:\n    pass"), "return x");
    }

    #[test]
    fn end_of_line_allows_a_nested_block() {
        let r = rule("def f(x):|\n");
        assert_eq!(r.mode, Mode::MultiLine { indent: 0 });
        assert_eq!(r.finish("\n    return x + 1\n\n\nprint(1)"), "\n    return x + 1");
    }

    #[test]
    fn a_loop_stops_the_generation_and_drops_its_line() {
        let r = rule("        log.info(\"ran %d|\", n)\n");
        let looping = " jobs, %d total attempts, %d total attempts, %d total attempts";
        // Two copies are not a loop yet; the third one is, and nothing of its line is kept.
        assert_eq!(r.check(&looping[..looping.len() - 20]), None);
        assert_eq!(r.check(looping), Some(0));
        assert_eq!(r.finish(looping), "");
        let block = rule("        summary = |\n");
        let dict = "{name: {name: {name: {name: {name: ";
        assert_eq!(block.check(&dict[..30]), None, "under 32 bytes");
        assert_eq!(block.check(dict), Some(0));
        // Lines written before the loop's line stay; a loop over whole lines is one too.
        assert_eq!(block.check(&format!("{{}}\n        total = {dict}")), Some(2));
        assert_eq!(block.finish(&format!("{{}}\n        total = {dict}")), "{}");
        assert_eq!(block.check("x()\n        x()\n        x()\n        x()\n"), Some(0));
        let lead = rule("        summary = |\n").with_lead(" ");
        assert_eq!(lead.check(&format!(" {dict}")), Some(1));
        // Ordinary code, short repeats, separators and a few zeros are no loop.
        for text in ["[0, 0, 0, 0, 0, 0, 0, 0", "[0, 0, 0, 0, 0, 0, 0, 0]", "# ----------------------------------------", "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s", "self.x = x\n        self.y = y\n        self.z = z"] {
            assert_eq!(block.check(text), None, "{text}");
        }
        // Text in other scripts is cut on a char boundary, also where the loop's first byte is
        // the middle of a character (`©` and `é` end in the same byte).
        let wide = format!("z\u{e4}\n{}", "\u{e9}\u{e4}1".repeat(12));
        assert_eq!(block.check(&wide), Some(3));
        assert_eq!(block.check(&format!("\u{a9}x{}", "\u{e9}x".repeat(12))), Some(0));
        // `bench --cold-sizes` needs every token: no cut.
        assert_eq!(StopRule::unbounded().check(dict), None);
    }

    #[test]
    fn does_not_repeat_the_next_line() {
        let r = rule("def f(x):\n    |\n    return y\n");
        assert_eq!(r.finish("y = x + 1\n    return y\n"), "y = x + 1");
    }

    #[test]
    fn an_argument_hole_ends_with_the_argument() {
        let one = rule("if is_valid(|):\n").arguments(Arguments::One);
        // The model goes on past the call's `)`: only the argument is kept.
        assert_eq!(one.check("ip) and ip.startswith(\":\"):"), Some(2));
        assert_eq!(one.finish("ip) and ip.startswith(\":\"):"), "ip");
        assert_eq!(one.finish("self.password, r"), "self.password");
        assert_eq!(one.finish("int(bits), 2"), "int(bits)");
        // Commas and closers inside strings or the argument's own brackets do not end it.
        assert_eq!(one.finish("\"a, b)\", c"), "\"a, b)\"");
        assert_eq!(one.finish("f(a, b)) + 1"), "f(a, b)");
        assert_eq!(one.check("f(a, "), None);
        let list = rule("x = load(|)\n").arguments(Arguments::List);
        assert_eq!(list.finish("path, 'r')\nprint(x)"), "path, 'r'");
        // An empty answer is no argument: the model may not end before writing one.
        assert!(one.unfinished("") && one.unfinished(" ") && !one.unfinished("ip"));
        let spaced = rule("f(a, |)\n").arguments(Arguments::One).with_lead(" ");
        assert!(spaced.unfinished("") && spaced.unfinished(" ") && !spaced.unfinished(" b"));
        // A space left out of the prompt is forced there: without it the text is cut to nothing.
        assert_eq!((spaced.forced_lead(), spaced.check("b")), (" ", Some(0)));
        assert_eq!(rule("f(a, |)\n").with_lead(" ").forced_lead(), "");
        assert!(!rule("x = load(|)\n").unfinished(""));
        // The characters a token may not start the blank text with hold every one the rule
        // cuts it at, so the text cannot end empty whichever token the model prefers; the rest
        // begin no argument.
        for (r, lead) in [(&one, ""), (&list, ""), (&spaced, " ")] {
            for c in r.blank_enders().chars().filter(|c| !":;=>.".contains(*c)) {
                assert_eq!(r.check(&format!("{lead} {c}x")), Some(lead.len() + 1), "{c:?}");
            }
        }
        assert_eq!(one.blank_enders(), "\n,)]}:;=>.");
        assert!(!list.blank_enders().contains(','), "a list's comma does not end it");
        assert_eq!(list.check("a, b"), None);
        assert_eq!(rule("x = load(|)\n").blank_enders(), "");
    }

    #[test]
    fn lead_is_required_and_left_out() {
        let r = rule("def f(x):\n    |\n").with_lead("\n    ");
        assert_eq!(r.check("\n "), None);
        assert_eq!(r.check("\n    return x\n"), None);
        assert_eq!(r.finish("\n    return x\n\n"), "return x");
        // deeper indentation is the model's to keep
        assert_eq!(r.finish("\n        nested()"), "    nested()");
        // a blank line, a dedent or text on the previous line: nothing to suggest
        assert_eq!(r.check("\n\n"), Some(0));
        assert_eq!(r.check("\nclass"), Some(0));
        assert_eq!(r.check(" # note"), Some(0));
        assert_eq!(r.finish("\nclass A: pass"), "");
    }

    #[test]
    fn a_call_left_open_at_the_end_of_a_line_is_unfinished() {
        let r = rule("def f(x):\n    |\n").with_lead("\n    ");
        assert!(!r.unfinished("\n"), "still in the lead");
        // Inside a lead holding a word part it may not end; right after the word it may.
        let w = rule("def f(x):\n    return F|\n").with_lead(" F");
        assert!(w.unfinished("") && w.unfinished(" "), "a word part left out of the prompt");
        assert!(!w.unfinished(" F") && !w.unfinished(" False"));
        assert!(!w.unfinished(" x"), "off the lead: the stop rule ends it");
        assert!(r.unfinished("\n    raise InvalidURL("));
        assert!(r.unfinished("\n    x = g(a, [1,\n        2"));
        assert!(!r.unfinished("\n    raise InvalidURL(*e.args)"));
        assert!(!r.unfinished("\n    s = \"(\" + ')'"), "brackets in strings do not count");
        assert!(!r.unfinished("\n    return x) or y"), "a closer of something before the text");
        // Mid-line, what follows the cursor may close it.
        assert!(!rule("x = foo(|)\n").unfinished("bar("));
    }

    #[test]
    fn brace_blocks_end_at_the_closing_brace() {
        let r = rule("fn f() {\n    |\n").with_braces();
        assert_eq!(r.finish("let x = g(1, [2]);\n    x + 1\n}\n\nfn h() {}"), "let x = g(1, [2]);\n    x + 1");
        assert_eq!(r.check("a }"), Some(2));
        let r = rule("x = foo(|").single_line();
        assert_eq!(r.mode, Mode::SingleLine);
    }

    #[test]
    fn crlf_and_tabs() {
        let r = rule("if a:\r\n\t|\r\n");
        assert_eq!(r.mode, Mode::MultiLine { indent: 4 });
        assert_eq!(r.finish("b = 1\r\n\tc = 2\r\nd"), "b = 1\r\n\tc = 2");
    }

    #[test]
    fn the_space_before_the_cursor_is_not_typed_again() {
        let r = rule("def greet(name):\n    return \"Hello, \" + |\n");
        assert_eq!(r.finish(" name + \"!\"\n"), "name + \"!\"");
        let r = rule("x = foo(a, |)\n");
        assert_eq!(r.finish(" b)"), "b");
        // No space before the cursor: the model's space is the one the line needs.
        let r = rule("return a +|\n");
        assert_eq!(r.finish(" b"), " b");
        // Indentation alone is not "code and a space": deeper indentation is the model's.
        let r = rule("def f(x):\n    |\n");
        assert_eq!(r.finish("    y = 1"), "    y = 1");
    }

    #[test]
    fn multibyte_text_cuts_on_char_boundaries() {
        let r = rule("s = \"|é\"\n");
        // the line already has `é"` after the cursor
        assert_eq!(r.finish("héé\"\n"), "hé");
        let r = rule("s = '|'\n");
        assert_eq!(r.finish("🦀'"), "🦀");
    }

    #[test]
    fn suggestions_that_add_nothing() {
        assert!(redundant("", "x"));
        assert!(redundant("  \n", ""));
        assert!(redundant(")", ""));
        assert!(redundant("]);", "\n"));
        assert!(redundant("})", ""));
        assert!(redundant("compute(a)", "compute(a)\n"));
        assert!(redundant("compute(", "compute(a)\n"));
        assert!(redundant("x\n    return y", "x\n    return y\n"));
        assert!(!redundant("x + 1)", ")"));
        assert!(!redundant("total", ""));
        assert!(!redundant("compute(b)", "compute(a)"));
        assert!(!redundant("\"hello\"", ""));
    }
}
