//! ghostline: a local-first AI coding language server.
//!
//! Where a keystroke goes: `lsp` (protocol, documents, positions) → `engine` → `context`
//! (which text) → `prompt` (which tokens, FIM or not) → `model` (the llama.cpp thread) →
//! `postprocess` (where the suggestion ends) → back through `lsp` as ghost text.

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
pub mod model;
pub mod postprocess;
pub mod prompt;
pub mod pull;
pub mod route;
pub mod stats;
pub mod stdio_client;
pub mod syntax;
pub mod typing;
