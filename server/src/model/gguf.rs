//! A small GGUF metadata reader: the header, the key/value metadata and the tensor table, read
//! without loading any weights.
//!
//! Used to plan memory before llama.cpp loads a model ([`super::memory`]), to rank models found
//! on disk ([`super::discover`]) and by `ghostline doctor`. Large arrays are skipped except the
//! vocabulary's token texts, which FIM detection needs. Format: GGUF v2/v3, little-endian
//! (<https://github.com/ggml-org/ggml/blob/master/docs/gguf.md>).

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::fim::{self, FimFormat, Token};

/// A metadata value. Arrays longer than [`KEEP_ARRAY`] are kept as their element count only.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Uint(u64),
    Float(f64),
    Bool(bool),
    Str(String),
    Array(Vec<Value>),
    /// An array that was skipped: its element count.
    Skipped(u64),
}

/// Arrays up to this many elements are kept (per-layer head counts and the like).
const KEEP_ARRAY: u64 = 4096;
/// The key whose string array (the vocabulary) is always kept.
const TOKENS_KEY: &str = "tokenizer.ggml.tokens";
/// Sanity limits against corrupt files: no single string or count beyond these.
const MAX_STRING: u64 = 1 << 24;
const MAX_COUNT: u64 = 1 << 26;

impl Value {
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::Uint(v) => Some(v),
            Value::Int(v) if v >= 0 => Some(v as u64),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// What a GGUF file says about itself.
#[derive(Debug, Clone)]
pub struct Gguf {
    pub version: u32,
    pub tensor_count: u64,
    pub metadata: BTreeMap<String, Value>,
    /// The vocabulary's token texts (`tokenizer.ggml.tokens`), when present.
    pub tokens: Vec<String>,
    /// Where the tensor data starts (after the header, aligned).
    pub data_offset: u64,
    pub file_size: u64,
}

#[derive(Debug)]
pub struct GgufError(pub String);

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GgufError {}

/// The dimensions that fix a model's memory use, from its GGUF metadata.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Shape {
    pub arch: String,
    pub n_layer: u32,
    pub n_head: u32,
    /// KV heads per layer (one value repeated when the model declares a single count).
    pub n_head_kv: Vec<u32>,
    pub n_embd: u32,
    /// Per-head dimension of keys and of values.
    pub head_dim_k: u32,
    pub head_dim_v: u32,
    pub n_ctx_train: u32,
    pub n_vocab: u32,
}

impl Gguf {
    /// Reads the header, metadata and tensor table of `path`.
    pub fn open(path: &Path) -> Result<Gguf, GgufError> {
        let shown = path.display();
        let file = File::open(path).map_err(|e| GgufError(format!("cannot read {shown}: {e}")))?;
        let file_size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut r = Reader { inner: BufReader::with_capacity(1 << 16, file), pos: 0 };
        Self::parse(&mut r, file_size).map_err(|e| GgufError(format!("{shown}: {e}")))
    }

    fn parse(r: &mut Reader, file_size: u64) -> Result<Gguf, String> {
        let mut magic = [0u8; 4];
        r.exact(&mut magic)?;
        if &magic != b"GGUF" {
            return Err("not a GGUF file (no GGUF magic bytes)".into());
        }
        let version = r.u32()?;
        if !(2..=3).contains(&version) {
            return Err(format!("unsupported GGUF version {version}"));
        }
        let tensor_count = r.u64()?;
        let kv_count = r.u64()?;
        if kv_count > MAX_COUNT || tensor_count > MAX_COUNT {
            return Err("corrupt GGUF header (implausible counts)".into());
        }
        let mut metadata = BTreeMap::new();
        let mut tokens = Vec::new();
        for _ in 0..kv_count {
            let key = r.string()?;
            let kind = r.u32()?;
            if key == TOKENS_KEY && kind == 9 {
                let elem = r.u32()?;
                let len = r.u64()?;
                if elem != 8 || len > MAX_COUNT {
                    return Err(format!("{TOKENS_KEY} is not an array of strings"));
                }
                tokens.reserve(len as usize);
                for _ in 0..len {
                    tokens.push(r.string()?);
                }
                metadata.insert(key, Value::Skipped(len));
                continue;
            }
            let value = r.value(kind)?;
            metadata.insert(key, value);
        }
        // The tensor table: name, dimensions, type, offset. Only its end matters here.
        for _ in 0..tensor_count {
            let _name = r.skip_string()?;
            let n_dims = r.u32()?;
            if n_dims > 8 {
                return Err("corrupt tensor table".into());
            }
            r.skip(8 * n_dims as u64 + 4 + 8)?;
        }
        let alignment = metadata.get("general.alignment").and_then(Value::as_u64).filter(|&a| a > 0).unwrap_or(32);
        let data_offset = r.pos.div_ceil(alignment) * alignment;
        if data_offset > file_size {
            return Err(format!("truncated: the header ends at byte {data_offset} but the file has {file_size} bytes"));
        }
        Ok(Gguf { version, tensor_count, metadata, tokens, data_offset, file_size })
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    pub fn u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(Value::as_u64)
    }

    pub fn arch(&self) -> Option<&str> {
        self.str("general.architecture")
    }

    /// `general.name`, else `None`.
    pub fn name(&self) -> Option<&str> {
        self.str("general.name")
    }

    /// Bytes of tensor data: what llama.cpp maps or copies as the model's weights.
    pub fn weights_bytes(&self) -> u64 {
        self.file_size - self.data_offset
    }

    /// The memory-relevant dimensions, from `<arch>.*` keys. Head dimension: the
    /// `<arch>.attention.key_length` / `value_length` keys when present, else n_embd / n_head.
    pub fn shape(&self) -> Result<Shape, String> {
        let arch = self.arch().ok_or("no general.architecture in the GGUF metadata")?.to_owned();
        let key = |k: &str| format!("{arch}.{k}");
        let need = |k: &str| -> Result<u32, String> {
            self.u64(&key(k)).map(|v| v as u32).ok_or_else(|| format!("no {} in the GGUF metadata", key(k)))
        };
        let n_layer = need("block_count")?;
        let n_embd = need("embedding_length")?;
        let n_ctx_train = need("context_length")?;
        let n_head = match self.get(&key("attention.head_count")) {
            Some(Value::Array(per_layer)) => per_layer.iter().filter_map(Value::as_u64).max().unwrap_or(0) as u32,
            Some(v) => v.as_u64().unwrap_or(0) as u32,
            None => 0,
        };
        if n_head == 0 {
            return Err(format!("no {} in the GGUF metadata", key("attention.head_count")));
        }
        let n_head_kv = match self.get(&key("attention.head_count_kv")) {
            Some(Value::Array(per_layer)) => per_layer.iter().map(|v| v.as_u64().unwrap_or(0) as u32).collect(),
            Some(v) => vec![v.as_u64().unwrap_or(n_head as u64) as u32; n_layer as usize],
            // No separate KV head count: multi-head attention.
            None => vec![n_head; n_layer as usize],
        };
        let head_dim_k = self.u64(&key("attention.key_length")).map(|v| v as u32).unwrap_or(n_embd / n_head);
        let head_dim_v = self.u64(&key("attention.value_length")).map(|v| v as u32).unwrap_or(head_dim_k);
        let n_vocab = self
            .u64(&key("vocab_size"))
            .map(|v| v as u32)
            .unwrap_or(self.tokens.len() as u32);
        Ok(Shape { arch, n_layer, n_head, n_head_kv, n_embd, head_dim_k, head_dim_v, n_ctx_train, n_vocab })
    }

    /// The FIM markers llama.cpp would find: the ids the metadata declares, else tokens whose
    /// text is a known marker; then their FIM format.
    pub fn fim_format(&self) -> FimFormat {
        let text = |id: Token| self.tokens.get(id as usize).map(String::as_str);
        let find = |keys: &[&str], texts: &[&'static str]| -> Option<(Token, &str)> {
            for k in keys {
                if let Some(id) = self.u64(&format!("tokenizer.ggml.{k}")) {
                    let id = id as Token;
                    if let Some(t) = text(id) {
                        return Some((id, t));
                    }
                }
            }
            texts.iter().find_map(|m| {
                let i = self.tokens.iter().position(|t| t == m)?;
                Some((i as Token, self.tokens[i].as_str()))
            })
        };
        let pre = find(
            &["fim_pre_token_id", "prefix_token_id"],
            &["<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "[PREFIX]"],
        );
        let suf = find(
            &["fim_suf_token_id", "suffix_token_id"],
            &["<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "[SUFFIX]"],
        );
        let mid = find(
            &["fim_mid_token_id", "middle_token_id"],
            &["<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "[MIDDLE]"],
        );
        fim::detect(pre, suf, mid)
    }
}

struct Reader {
    inner: BufReader<File>,
    pos: u64,
}

impl Reader {
    fn exact(&mut self, buf: &mut [u8]) -> Result<(), String> {
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => format!("truncated GGUF header (ends inside byte {})", self.pos),
            _ => e.to_string(),
        })?;
        self.pos += buf.len() as u64;
        Ok(())
    }
    fn skip(&mut self, n: u64) -> Result<(), String> {
        self.inner.seek_relative(n as i64).map_err(|e| e.to_string())?;
        self.pos += n;
        Ok(())
    }
    fn u32(&mut self) -> Result<u32, String> {
        let mut b = [0u8; 4];
        self.exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn u64(&mut self) -> Result<u64, String> {
        let mut b = [0u8; 8];
        self.exact(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn string_len(&mut self) -> Result<u64, String> {
        let len = self.u64()?;
        if len > MAX_STRING {
            return Err(format!("corrupt GGUF header (a string of {len} bytes at byte {})", self.pos));
        }
        Ok(len)
    }
    fn string(&mut self) -> Result<String, String> {
        let len = self.string_len()?;
        let mut buf = vec![0u8; len as usize];
        self.exact(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
    fn skip_string(&mut self) -> Result<(), String> {
        let len = self.string_len()?;
        self.skip(len)
    }
    /// Size of a fixed-size value type, `None` for strings and arrays.
    fn fixed_size(kind: u32) -> Option<u64> {
        match kind {
            0 | 1 | 7 => Some(1),
            2 | 3 => Some(2),
            4..=6 => Some(4),
            10..=12 => Some(8),
            _ => None,
        }
    }
    fn value(&mut self, kind: u32) -> Result<Value, String> {
        let mut b8 = [0u8; 8];
        Ok(match kind {
            0 => {
                self.exact(&mut b8[..1])?;
                Value::Uint(b8[0] as u64)
            }
            1 => {
                self.exact(&mut b8[..1])?;
                Value::Int(b8[0] as i8 as i64)
            }
            2 => {
                self.exact(&mut b8[..2])?;
                Value::Uint(u16::from_le_bytes([b8[0], b8[1]]) as u64)
            }
            3 => {
                self.exact(&mut b8[..2])?;
                Value::Int(i16::from_le_bytes([b8[0], b8[1]]) as i64)
            }
            4 => Value::Uint(self.u32()? as u64),
            5 => Value::Int(self.u32()? as i32 as i64),
            6 => Value::Float(f32::from_bits(self.u32()?) as f64),
            7 => {
                self.exact(&mut b8[..1])?;
                Value::Bool(b8[0] != 0)
            }
            8 => Value::Str(self.string()?),
            9 => {
                let elem = self.u32()?;
                let len = self.u64()?;
                if len > MAX_COUNT {
                    return Err("corrupt GGUF header (implausible array length)".into());
                }
                if len > KEEP_ARRAY {
                    match Self::fixed_size(elem) {
                        Some(size) => self.skip(size * len)?,
                        None if elem == 8 => {
                            for _ in 0..len {
                                self.skip_string()?;
                            }
                        }
                        None => return Err(format!("unsupported GGUF array element type {elem}")),
                    }
                    Value::Skipped(len)
                } else {
                    let mut items = Vec::with_capacity(len as usize);
                    for _ in 0..len {
                        items.push(self.value(elem)?);
                    }
                    Value::Array(items)
                }
            }
            10 => Value::Uint(self.u64()?),
            11 => Value::Int(self.u64()? as i64),
            12 => Value::Float(f64::from_bits(self.u64()?)),
            other => return Err(format!("unknown GGUF value type {other} at byte {}", self.pos)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a minimal GGUF v3 file with the given metadata (strings and u32s) and no tensors.
    pub(crate) fn write_gguf(path: &Path, kvs: &[(&str, Value)], tokens: &[&str], data: usize) {
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        let n = kvs.len() + usize::from(!tokens.is_empty());
        out.extend_from_slice(&(n as u64).to_le_bytes());
        let s = |out: &mut Vec<u8>, s: &str| {
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        };
        for (k, v) in kvs {
            s(&mut out, k);
            match v {
                Value::Uint(u) => {
                    out.extend_from_slice(&4u32.to_le_bytes());
                    out.extend_from_slice(&(*u as u32).to_le_bytes());
                }
                Value::Str(t) => {
                    out.extend_from_slice(&8u32.to_le_bytes());
                    s(&mut out, t);
                }
                Value::Array(items) => {
                    out.extend_from_slice(&9u32.to_le_bytes());
                    out.extend_from_slice(&4u32.to_le_bytes());
                    out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                    for i in items {
                        out.extend_from_slice(&(i.as_u64().unwrap() as u32).to_le_bytes());
                    }
                }
                _ => unimplemented!(),
            }
        }
        if !tokens.is_empty() {
            s(&mut out, TOKENS_KEY);
            out.extend_from_slice(&9u32.to_le_bytes());
            out.extend_from_slice(&8u32.to_le_bytes());
            out.extend_from_slice(&(tokens.len() as u64).to_le_bytes());
            for t in tokens {
                s(&mut out, t);
            }
        }
        while out.len() % 32 != 0 {
            out.push(0);
        }
        out.extend(std::iter::repeat_n(0u8, data));
        std::fs::write(path, out).unwrap();
    }

    /// A path named `name` in a fresh folder, and the folder's guard.
    fn temp(name: &str) -> (crate::testing::TempDir, std::path::PathBuf) {
        let dir = crate::testing::TempDir::new("gguf");
        let path = dir.join(name);
        (dir, path)
    }

    #[test]
    fn synthetic_header_shape_and_fim() {
        let (_dir, path) = temp("coder.gguf");
        write_gguf(
            &path,
            &[
                ("general.architecture", Value::Str("qwen2".into())),
                ("qwen2.block_count", Value::Uint(28)),
                ("qwen2.embedding_length", Value::Uint(1536)),
                ("qwen2.context_length", Value::Uint(32768)),
                ("qwen2.attention.head_count", Value::Uint(12)),
                ("qwen2.attention.head_count_kv", Value::Uint(2)),
            ],
            &["a", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"],
            1000,
        );
        let g = Gguf::open(&path).unwrap();
        assert_eq!(g.weights_bytes(), 1000);
        let s = g.shape().unwrap();
        assert_eq!((s.n_layer, s.head_dim_k, s.head_dim_v, s.n_ctx_train, s.n_vocab), (28, 128, 128, 32768, 4));
        assert_eq!(s.n_head_kv, vec![2; 28]);
        assert_eq!(g.fim_format().to_string(), "FIM Qwen (PSM)");
    }

    #[test]
    fn per_layer_kv_heads_and_key_length() {
        let (_dir, path) = temp("per-layer.gguf");
        write_gguf(
            &path,
            &[
                ("general.architecture", Value::Str("x".into())),
                ("x.block_count", Value::Uint(3)),
                ("x.embedding_length", Value::Uint(100)),
                ("x.context_length", Value::Uint(2048)),
                ("x.attention.head_count", Value::Uint(4)),
                ("x.attention.head_count_kv", Value::Array(vec![Value::Uint(1), Value::Uint(2), Value::Uint(4)])),
                ("x.attention.key_length", Value::Uint(32)),
            ],
            &[],
            0,
        );
        let s = Gguf::open(&path).unwrap().shape().unwrap();
        assert_eq!(s.n_head_kv, vec![1, 2, 4]);
        assert_eq!((s.head_dim_k, s.head_dim_v), (32, 32));
    }

    #[test]
    fn errors_name_the_problem() {
        let (_dir, path) = temp("text.gguf");
        std::fs::write(&path, "hello world, not a model").unwrap();
        assert!(Gguf::open(&path).unwrap_err().0.contains("not a GGUF file"));
        let (_dir, path) = temp("short.gguf");
        std::fs::write(&path, b"GGUF\x03\x00\x00\x00\x00").unwrap();
        assert!(Gguf::open(&path).unwrap_err().0.contains("truncated"));
    }
}
