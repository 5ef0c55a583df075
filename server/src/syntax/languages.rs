//! The language registry: one line per language, its queries in `grammars/<name>/`.

use super::{BlockEnd, Spec};

macro_rules! queries {
    ($dir:literal) => {
        (
            include_str!(concat!("../../../grammars/", $dir, "/scopes.scm")),
            include_str!(concat!("../../../grammars/", $dir, "/outline.scm")),
        )
    };
}

/// Every language ghostline understands. To add one: a folder of queries and a line here.
pub(super) fn all() -> Vec<Spec> {
    vec![
        Spec::new("python", &["python"], &["py", "pyi"], tree_sitter_python::LANGUAGE.into(), BlockEnd::Indent, queries!("python")),
        Spec::new("rust", &["rust"], &["rs"], tree_sitter_rust::LANGUAGE.into(), BlockEnd::Braces, queries!("rust")),
        Spec::new("javascript", &["javascript", "javascriptreact"], &["js", "mjs", "cjs", "jsx"], tree_sitter_javascript::LANGUAGE.into(), BlockEnd::Braces, queries!("javascript")),
        Spec::new("typescript", &["typescript"], &["ts", "mts", "cts"], tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(), BlockEnd::Braces, queries!("typescript")),
        Spec::new("tsx", &["typescriptreact"], &["tsx"], tree_sitter_typescript::LANGUAGE_TSX.into(), BlockEnd::Braces, queries!("typescript")),
        Spec::new("go", &["go"], &["go"], tree_sitter_go::LANGUAGE.into(), BlockEnd::Braces, queries!("go")),
    ]
}
