//! ghostline: a local-first AI coding language server.
//!
//! Where a keystroke goes: `lsp` (protocol, documents, positions) → `engine` → `context`
//! (which text) and `postprocess` (where the suggestion ends) → `prompt` (the plan: budget and
//! tokens, FIM or not) → `model` (the llama.cpp thread, which knows no prompt layout) →
//! `postprocess` (clean-up) → back through `lsp` as ghost text. ARCHITECTURE.md has the map.

pub mod actions;
pub mod bench;
pub mod cli;
pub mod cloud;
pub mod config;
pub mod context;
pub mod demo;
pub mod doctor;
pub mod engine;
pub mod eval;
pub mod exclude;
pub mod fault;
pub mod lsp;
pub mod memo;
pub mod model;
pub mod nextedit;
pub mod postprocess;
pub mod prompt;
pub mod pull;
pub mod route;
pub mod session;
pub mod stats;
pub mod stdio_client;
pub mod syntax;
pub mod text;
#[cfg(test)]
pub(crate) mod testing;
pub mod typing;
pub mod uri;
pub mod workspace;
