//! The privacy guard: secrets and personal data become placeholders before a prompt leaves the
//! machine, and are put back in the answer; files matching exclusion globs are never sent.
//!
//! Patterns: private key blocks, AWS key ids, GitHub/Slack/Stripe/OpenAI/Google tokens, JWTs,
//! passwords in URLs, quoted values of secret-looking names (`password = "…"`, `"apiKey": "…"`,
//! also one still being typed at the end of the text),
//! `.env`-style `NAME=value` lines with secret-looking names, e-mail addresses and phone numbers.
//! The same value always gets the same placeholder, so code that repeats it stays consistent.

use std::sync::OnceLock;

use globset::{Glob, GlobSet, GlobSetBuilder};
use regex::{Captures, Regex};

/// Secret-looking names (for assignments and `.env` lines).
const NAME: &str = r"[A-Za-z0-9_.-]*(?:[Pp][Aa][Ss][Ss][Ww][Oo][Rr][Dd]|[Pp][Aa][Ss][Ss][Ww][Dd]|[Pp][Ww][Dd]|[Ss][Ee][Cc][Rr][Ee][Tt]|[Tt][Oo][Kk][Ee][Nn]|[Aa][Pp][Ii]_?[Kk][Ee][Yy]|[Aa][Cc][Cc][Ee][Ss][Ss]_?[Kk][Ee][Yy]|[Pp][Rr][Ii][Vv][Aa][Tt][Ee]_?[Kk][Ee][Yy]|[Cc][Rr][Ee][Dd][Ee][Nn][Tt][Ii][Aa][Ll]|[Aa][Uu][Tt][Hh])[A-Za-z0-9_.-]*";

/// `(kind, pattern, capture group holding the secret)`, applied in order.
fn patterns() -> &'static [(&'static str, Regex, usize)] {
    static P: OnceLock<Vec<(&'static str, Regex, usize)>> = OnceLock::new();
    P.get_or_init(|| {
        let r = |s: &str| Regex::new(s).expect("redaction pattern");
        vec![
            ("PRIVATE_KEY", r(r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"), 0),
            ("AWS_KEY_ID", r(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), 0),
            ("TOKEN", r(r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b|\bgithub_pat_[A-Za-z0-9_]{22,255}\b"), 0),
            ("TOKEN", r(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), 0),
            ("TOKEN", r(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}\b"), 0),
            ("TOKEN", r(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"), 0),
            ("TOKEN", r(r"\bAIza[0-9A-Za-z_-]{35}\b"), 0),
            ("TOKEN", r(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
            // scheme://user:PASSWORD@host
            ("PASSWORD", r(r#"[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'"]+:([^\s@'"/]+)@"#), 1),
            // name = "VALUE", name: 'VALUE', "name": "VALUE", name => "VALUE"
            ("SECRET", r(&format!(r#"(?:{NAME})["']?\s*(?::=|=>|[:=])\s*["']([^"'\n]{{4,}})["']"#)), 1),
            // The same with the value still being typed: the text (the prompt's part before
            // the cursor) ends inside the quotes.
            ("SECRET", r(&format!(r#"(?:{NAME})["']?\s*(?::=|=>|[:=])\s*["']([^"'\n]+)\z"#)), 1),
            // .env lines: NAME=VALUE (optionally `export`), unquoted
            ("SECRET", r(&format!(r#"(?m)^[ \t]*(?:export[ \t]+)?(?:{NAME})[ \t]*=[ \t]*([^\s#"'(){{}}\[\],;]{{4,}})[ \t]*$"#)), 1),
            ("EMAIL", r(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"), 0),
            ("PHONE", r(r"(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)|\b\d{2,4})[ .-]\d{3,4}[ .-]\d{3,4}\b"), 0),
        ]
    })
}

/// The placeholders of one redacted request, to restore the answer with.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Redactions {
    /// `(placeholder, original)`.
    pub pairs: Vec<(String, String)>,
}

impl Redactions {
    /// Puts the originals back wherever the answer repeats a placeholder.
    pub fn restore(&self, text: &str) -> String {
        let mut pairs: Vec<&(String, String)> = self.pairs.iter().collect();
        // Longest first, so `…_1` never eats the start of `…_10`.
        pairs.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        let mut out = text.to_owned();
        for (placeholder, original) in pairs {
            out = out.replace(placeholder.as_str(), original);
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    fn placeholder(&mut self, kind: &str, original: &str) -> String {
        if let Some((p, _)) = self.pairs.iter().find(|(_, o)| o == original) {
            return p.clone();
        }
        let p = format!("REDACTED_{kind}_{}", self.pairs.len() + 1);
        self.pairs.push((p.clone(), original.to_owned()));
        p
    }
}

/// Redacts `text`, adding to `redactions` (shared across the messages of one request).
pub fn redact(text: &str, redactions: &mut Redactions) -> String {
    let mut out = text.to_owned();
    for (kind, re, group) in patterns() {
        out = re
            .replace_all(&out, |c: &Captures<'_>| {
                let whole = c.get(0).expect("match");
                let Some(secret) = c.get(*group) else { return whole.as_str().to_owned() };
                if secret.as_str().starts_with("REDACTED_") {
                    return whole.as_str().to_owned();
                }
                let placeholder = redactions.placeholder(kind, secret.as_str());
                let (a, b) = (secret.start() - whole.start(), secret.end() - whole.start());
                format!("{}{}{}", &whole.as_str()[..a], placeholder, &whole.as_str()[b..])
            })
            .into_owned();
    }
    out
}

/// Exclusion globs (`.env`, `*.pem`, `secrets/**` …): files that are never sent.
pub struct Exclusions {
    globs: Vec<String>,
    set: GlobSet,
}

impl Exclusions {
    /// Invalid globs are reported and skipped.
    pub fn new(globs: &[String]) -> (Exclusions, Vec<String>) {
        let mut builder = GlobSetBuilder::new();
        let mut kept = Vec::new();
        let mut errors = Vec::new();
        for g in globs {
            match Glob::new(g) {
                Ok(glob) => {
                    builder.add(glob);
                    kept.push(g.clone());
                }
                Err(e) => errors.push(format!("invalid exclusion glob `{g}`: {e}")),
            }
        }
        let set = builder.build().unwrap_or_else(|_| GlobSet::empty());
        (Exclusions { globs: kept, set }, errors)
    }

    /// The first glob that `relative` (a path relative to the workspace, `/`-separated) or its
    /// file name matches.
    pub fn matching(&self, relative: &str) -> Option<&str> {
        let name = relative.rsplit('/').next().unwrap_or(relative);
        let hits = self.set.matches(relative);
        let hits = if hits.is_empty() { self.set.matches(name) } else { hits };
        hits.first().map(|&i| self.globs[i].as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Realistic fake secrets, each of which must not survive redaction.
    const CANARIES: &[&str] = &[
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        "AIzaSyA-1234567890abcdefghijklmnopqrstu",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "hunter2pass",
        "s3cr3t-db-pw",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
        "jane.doe@example.com",
        "+1 415 555 0132",
        "dotenvsecretvalue42",
        "tok_live_998877",
    ];

    const FILE: &str = r#"import boto3

AWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB = "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
slack = 'xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx'
stripe_key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
client = OpenAI(api_key="sk-proj-abcdefghijklmnopqrstuvwxyz012345")
maps = "AIzaSyA-1234567890abcdefghijklmnopqrstu"
session = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
config = {"password": "hunter2pass", "user": "app"}
DATABASE_URL = "postgres://app:s3cr3t-db-pw@db.internal:5432/orders"
KEY = """-----BEGIN RSA PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7
-----END RSA PRIVATE KEY-----"""
# Contact: jane.doe@example.com or +1 415 555 0132
"#;

    const DOTENV: &str = "# .env\nAPI_TOKEN=dotenvsecretvalue42\nexport STRIPE_SECRET=tok_live_998877\nDEBUG=true\nPORT=8080\n";

    #[test]
    fn realistic_secrets_never_survive_and_come_back_in_the_answer() {
        let mut r = Redactions::default();
        let sent = format!("{}\n{}", redact(FILE, &mut r), redact(DOTENV, &mut r));
        for canary in CANARIES {
            assert!(!sent.contains(canary), "{canary} leaked:\n{sent}");
        }
        // Code structure and harmless values stay as they were.
        assert!(sent.contains("import boto3") && sent.contains("\"user\": \"app\"") && sent.contains("db.internal:5432"));
        assert!(sent.contains("DEBUG=true") && sent.contains("PORT=8080"), "{sent}");
        assert!(sent.contains("REDACTED_PRIVATE_KEY_"), "{sent}");
        // The answer repeats placeholders; restoring gives the originals back.
        let answer = format!("assert connect() == {:?}", r.pairs[1].0);
        assert_eq!(r.restore(&answer), format!("assert connect() == {:?}", r.pairs[1].1));
    }

    #[test]
    fn same_secret_same_placeholder_and_no_double_redaction() {
        let mut r = Redactions::default();
        let a = redact("password = \"hunter2pass\"\nretry(password=\"hunter2pass\")", &mut r);
        assert_eq!(r.pairs.len(), 1, "{a}");
        assert_eq!(a.matches("REDACTED_SECRET_1").count(), 2, "{a}");
        let again = redact(&a, &mut r);
        assert_eq!(again, a);
        assert_eq!(r.restore(&a), "password = \"hunter2pass\"\nretry(password=\"hunter2pass\")");
    }

    #[test]
    fn a_secret_value_being_typed_is_redacted_too() {
        // The prompt's text before the cursor ends inside the quotes: no closing quote yet.
        let mut r = Redactions::default();
        let sent = redact("import db\n\nDB_PASSWORD = \"hunter2-wo", &mut r);
        assert!(!sent.contains("hunter2") && sent.ends_with("DB_PASSWORD = \"REDACTED_SECRET_1"), "{sent}");
        assert_eq!(r.restore(&sent), "import db\n\nDB_PASSWORD = \"hunter2-wo");
        // Only at the end: an unclosed quote earlier in the text is something else.
        let code = "token = \"abc\ndef f():\n    return 1\n";
        assert_eq!(redact(code, &mut Redactions::default()), code);
    }

    #[test]
    fn ordinary_code_is_left_alone() {
        let code = "def token_count(text):\n    token = next_token(text)\n    password_field = form.get('password')\n    return 1000 + 2000\n";
        let mut r = Redactions::default();
        assert_eq!(redact(code, &mut r), code);
        assert!(r.is_empty());
    }

    #[test]
    fn exclusion_globs_match_paths_and_names() {
        let globs: Vec<String> = crate::config::DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect();
        let (ex, errors) = Exclusions::new(&globs);
        assert!(errors.is_empty());
        assert_eq!(ex.matching(".env"), Some(".env"));
        assert!(ex.matching("config/.env.production").is_some());
        assert!(ex.matching("deploy/server.pem").is_some());
        assert!(ex.matching("secrets/db/password.txt").is_some());
        assert!(ex.matching("src/app/secrets/keys.py").is_some());
        assert_eq!(ex.matching("src/app/main.py"), None);
        let (_, errors) = Exclusions::new(&["a[".to_string()]);
        assert!(errors[0].contains("a["));
    }
}
