//! The WGSL library: sources embedded from the crate's `shaders/` folder (`common/`, then one
//! folder per op), and a small
//! preprocessor that turns a source plus a set of defines into one shader variant.
//!
//! Directives: `#include "file"`, `#define NAME value`, `#undef NAME`, `#ifdef`, `#ifndef`,
//! `#if EXPR`, `#elif EXPR`, `#else`, `#endif`, and `#for NAME in START..END` … `#endfor`
//! (the body repeated with NAME defined as each value: an unrolled loop). Expressions take integers, `defined(NAME)`,
//! macro names, `! * / % + - < <= > >= == != && ||` and parentheses. Defines given by the host
//! cannot be redefined by the shader, so `#define` in a shader acts as a default. Macros are
//! object-like and expanded per identifier, recursively; `a ## b` pastes the expanded tokens
//! (`FMT##_value` with `FMT` = `k` gives `k_value`), so one file can be included several times
//! under different prefixes.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Embeds `backend/shaders/<group>/<file>` under its file name (`#include` names files alone),
/// as the build script copied it: without the measurement-only probe branches unless the
/// `probes` feature is on (`build/strip_probes.rs`).
macro_rules! sources {
    ($($group:literal: [$($file:literal),* $(,)?]),* $(,)?) => {
        &[$($(($file, include_str!(concat!(env!("OUT_DIR"), "/shaders/", $group, "/", $file))),)*)*]
    };
}

/// Every embedded source, by file name: the shared parts, then one group per op.
const SOURCES: &[(&str, &str)] = sources!(
    "common": ["common.wgsl", "formats.wgsl", "format_tables.wgsl", "row_reduce.wgsl"],
    "dequantize": ["dequantize.wgsl"],
    "rows": ["rows.wgsl", "encode.wgsl", "transpose.wgsl"],
    "rope": ["rope.wgsl", "rope_yarn.wgsl"],
    "norm": ["rms_norm.wgsl"],
    "soft_max": ["soft_max.wgsl"],
    "argmax": ["argmax.wgsl"],
    "scale": ["scale.wgsl"],
    "binary": ["binary.wgsl"],
    "glu": ["glu.wgsl"],
    "write": ["write.wgsl"],
    "mul_mat": [
        "mul_mat_operands.wgsl",
        "mul_mat_stage.wgsl",
        "mul_mat_simple.wgsl",
        "mul_mat_tiled.wgsl",
        "mul_mat_subgroup_matrix.wgsl",
        "mul_mat_vec.wgsl",
        "mul_mat_vec_q8.wgsl",
        "mul_mat_vec_kq.wgsl",
        "mul_mat_quantize_b.wgsl",
        "mul_mat_norm.wgsl",
        "mul_mat_dequantize_a.wgsl",
        "mul_mat_convert_b.wgsl",
    ],
    "flash_attn": [
        "flash_attn_common.wgsl",
        "flash_attn_kv.wgsl",
        "flash_attn_simple.wgsl",
        "flash_attn_tile.wgsl",
        "flash_attn_mma.wgsl",
        "flash_attn_vec.wgsl",
        "flash_attn_reduce.wgsl",
    ],
);

/// The names of every embedded source.
pub const SOURCE_NAMES: [&str; SOURCES.len()] = {
    let mut names = [""; SOURCES.len()];
    let mut i = 0;
    while i < SOURCES.len() {
        names[i] = SOURCES[i].0;
        i += 1;
    }
    names
};

/// The text of an embedded source.
pub fn source(name: &str) -> Option<&'static str> {
    SOURCES.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

/// The calls in `wgsl` of the subgroup-matrix load and store forms Dawn's WGSL dropped during
/// 2026: `subgroupMatrixLoad<T>(p, offset, col_major, stride)` and `subgroupMatrixStore(p,
/// offset, value, col_major, stride)`, whose majorness is a `bool` argument, where the current
/// forms take it as a template parameter (`subgroupMatrixLoad<T, row_major>(p, offset, stride)`,
/// `subgroupMatrixStore<col_major>(p, offset, value, stride)`). Deprecated in the Dawn revisions
/// the project builds against, so a shader using them still compiles there: this check (and
/// the deprecation-free compile test in `tests/`) keeps them out. Each hit is its line.
pub fn removed_subgroup_matrix_forms(wgsl: &str) -> Vec<String> {
    let mut hits = Vec::new();
    for line in wgsl.lines() {
        let code = line.split("//").next().unwrap_or("");
        for (name, template_args) in [("subgroupMatrixLoad", 2), ("subgroupMatrixStore", 1)] {
            let mut rest = code;
            while let Some(at) = rest.find(name) {
                rest = &rest[at + name.len()..];
                let after = rest.trim_start();
                let args = if let Some(inner) = after.strip_prefix('<') {
                    // Count the top-level template arguments up to the matching `>`.
                    let (mut depth, mut count) = (1usize, 1usize);
                    for c in inner.chars() {
                        match c {
                            '<' => depth += 1,
                            '>' => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            ',' if depth == 1 => count += 1,
                            _ => {}
                        }
                    }
                    count
                } else if after.starts_with('(') {
                    0
                } else {
                    continue; // a mention, not a call
                };
                if args < template_args {
                    hits.push(line.trim().to_owned());
                }
            }
        }
    }
    hits
}

/// One shader variant: a source file and the defines it is built with. Its `Display` is the
/// variant key used in pipeline caches, logs and error messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShaderVariant {
    pub file: &'static str,
    pub defines: BTreeMap<String, String>,
}

impl ShaderVariant {
    pub fn new(file: &'static str) -> Self {
        ShaderVariant {
            file,
            defines: BTreeMap::new(),
        }
    }

    /// Adds a define (`value` is pasted as is: include WGSL suffixes such as `32u`).
    pub fn define(mut self, name: &str, value: impl fmt::Display) -> Self {
        self.defines.insert(name.to_owned(), value.to_string());
        self
    }

    /// Adds a define with value 1 when `on`.
    pub fn flag(self, name: &str, on: bool) -> Self {
        if on { self.define(name, 1) } else { self }
    }

    /// The WGSL text of the variant.
    pub fn render(&self) -> Result<String, PreprocessError> {
        let text = source(self.file).ok_or_else(|| PreprocessError::new(self.file, 0, "no such shader source"))?;
        let mut pp = Preprocessor {
            macros: HashMap::new(),
            fixed: self.defines.keys().cloned().collect(),
        };
        for (k, v) in &self.defines {
            pp.macros.insert(k.clone(), v.clone());
        }
        let mut out = String::with_capacity(text.len() * 2);
        pp.process(self.file, text, &mut out, 0)?;
        Ok(out)
    }
}

impl fmt::Display for ShaderVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.trim_end_matches(".wgsl"))?;
        for (k, v) in &self.defines {
            write!(f, ",{k}={v}")?;
        }
        Ok(())
    }
}

/// A preprocessing failure, located in its source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct PreprocessError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl PreprocessError {
    fn new(file: &str, line: usize, message: impl Into<String>) -> Self {
        PreprocessError {
            file: file.to_owned(),
            line,
            message: message.into(),
        }
    }
}

struct Preprocessor {
    macros: HashMap<String, String>,
    /// Host defines: the shader cannot change them.
    fixed: std::collections::HashSet<String>,
}

/// The state of one `#if` block.
struct Conditional {
    /// Whether the enclosing text is emitted at all.
    parent_active: bool,
    /// Whether some branch of this block was taken already.
    taken: bool,
    /// Whether the current branch is emitted.
    active: bool,
}

impl Preprocessor {
    fn process(&mut self, file: &str, text: &str, out: &mut String, depth: usize) -> Result<(), PreprocessError> {
        if depth > 16 {
            return Err(PreprocessError::new(file, 0, "includes nested too deeply (a cycle?)"));
        }
        let mut stack: Vec<Conditional> = Vec::new();
        let active = |stack: &Vec<Conditional>| stack.last().is_none_or(|c| c.active);
        let mut lines = text.lines().enumerate();
        while let Some((index, raw)) = lines.next() {
            let line_no = index + 1;
            let err = |m: &str| PreprocessError::new(file, line_no, m);
            let mut line = raw.to_owned();
            while line.ends_with('\\') {
                line.pop();
                match lines.next() {
                    Some((_, next)) => line.push_str(next),
                    None => break,
                }
            }
            let trimmed = line.trim_start();
            let Some(directive) = trimmed.strip_prefix('#') else {
                if active(&stack) {
                    out.push_str(&self.expand(&line, file, line_no)?);
                    out.push('\n');
                }
                continue;
            };
            let (name, rest) = directive.split_once(char::is_whitespace).unwrap_or((directive, ""));
            let rest = rest.trim();
            match name {
                "ifdef" | "ifndef" | "if" => {
                    let parent_active = active(&stack);
                    let cond = parent_active
                        && match name {
                            "ifdef" => self.macros.contains_key(rest),
                            "ifndef" => !self.macros.contains_key(rest),
                            _ => self.eval(rest).map_err(|m| err(&m))? != 0,
                        };
                    stack.push(Conditional {
                        parent_active,
                        taken: cond,
                        active: cond,
                    });
                }
                "elif" => {
                    let value = self.eval(rest).map_err(|m| err(&m))?;
                    let top = stack.last_mut().ok_or_else(|| err("#elif without #if"))?;
                    top.active = top.parent_active && !top.taken && value != 0;
                    top.taken |= top.active;
                }
                "else" => {
                    let top = stack.last_mut().ok_or_else(|| err("#else without #if"))?;
                    top.active = top.parent_active && !top.taken;
                    top.taken = true;
                }
                "endif" => {
                    stack.pop().ok_or_else(|| err("#endif without #if"))?;
                }
                _ if !active(&stack) => {}
                "define" => {
                    let (key, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                    if key.is_empty() {
                        return Err(err("#define without a name"));
                    }
                    if !self.fixed.contains(key) {
                        self.macros.insert(key.to_owned(), value.trim().to_owned());
                    }
                }
                "undef" => {
                    if !self.fixed.contains(rest) {
                        self.macros.remove(rest);
                    }
                }
                "for" => {
                    // `#for NAME in START..END`: the body up to the matching `#endfor`, once per
                    // value, with NAME defined as it. WGSL has no unroll hint and drivers may
                    // leave loops rolled, which moves register arrays indexed by the loop
                    // counter to memory; unrolled copies index them with constants.
                    let (var, range) = rest
                        .split_once(" in ")
                        .ok_or_else(|| err("#for needs `NAME in START..END`"))?;
                    let (start, end) = range
                        .split_once("..")
                        .ok_or_else(|| err("#for needs `NAME in START..END`"))?;
                    let var = var.trim();
                    // An unknown name would count as 0 and silently drop the body.
                    if let Some(name) = self.first_undefined(start).or_else(|| self.first_undefined(end)) {
                        return Err(err(&format!("#for bound names `{name}`, which is not defined")));
                    }
                    let start = self.eval(start).map_err(|m| err(&m))?;
                    let end = self.eval(end).map_err(|m| err(&m))?;
                    if end - start > 1024 {
                        return Err(err("#for over more than 1024 values"));
                    }
                    let mut body = String::new();
                    let mut nesting = 1;
                    for (_, next) in lines.by_ref() {
                        let word = next.trim_start().strip_prefix('#').map(|d| d.split_whitespace().next());
                        match word {
                            Some(Some("for")) => nesting += 1,
                            Some(Some("endfor")) => nesting -= 1,
                            _ => {}
                        }
                        if nesting == 0 {
                            break;
                        }
                        body.push_str(next);
                        body.push('\n');
                    }
                    if nesting != 0 {
                        return Err(err("#for without #endfor"));
                    }
                    let saved = self.macros.get(var).cloned();
                    for value in start..end {
                        self.macros.insert(var.to_owned(), value.to_string());
                        self.process(file, &body, out, depth + 1)?;
                    }
                    match saved {
                        Some(v) => self.macros.insert(var.to_owned(), v),
                        None => self.macros.remove(var),
                    };
                }
                "endfor" => return Err(err("#endfor without #for")),
                "include" => {
                    let target = rest.trim_matches('"');
                    let text =
                        source(target).ok_or_else(|| err(&format!("cannot include `{target}`: no such source")))?;
                    self.process(target, text, out, depth + 1)?;
                }
                other => return Err(err(&format!("unknown directive #{other}"))),
            }
        }
        if !stack.is_empty() {
            return Err(PreprocessError::new(file, text.lines().count(), "#if without #endif"));
        }
        Ok(())
    }

    /// Replaces macro names in a line of WGSL, recursively (at most 16 levels).
    fn expand(&self, line: &str, file: &str, line_no: usize) -> Result<String, PreprocessError> {
        let mut current = line.to_owned();
        for _ in 0..16 {
            let (next, changed) = self.expand_once(&current);
            if !changed {
                return Ok(paste(&next));
            }
            current = next;
        }
        Err(PreprocessError::new(
            file,
            line_no,
            "macro expansion does not terminate",
        ))
    }

    fn expand_once(&self, line: &str) -> (String, bool) {
        let mut out = String::with_capacity(line.len());
        let mut changed = false;
        let bytes = line.as_bytes();
        let mut i = 0;
        // Comments are copied as they are.
        while i < bytes.len() {
            let c = bytes[i] as char;
            if c == '/' && bytes.get(i + 1) == Some(&b'/') {
                out.push_str(&line[i..]);
                break;
            }
            if c.is_ascii_alphabetic() || c == '_' {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let word = &line[start..i];
                match self.macros.get(word) {
                    Some(value) => {
                        out.push_str(value);
                        changed = true;
                    }
                    None => out.push_str(word),
                }
                continue;
            }
            if c.is_ascii_digit() {
                // A number with its suffix (`32u`, `1e-3f`): never a macro.
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.' || bytes[i] == b'_') {
                    i += 1;
                }
                out.push_str(&line[start..i]);
                continue;
            }
            let len = line[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&line[i..i + len]);
            i += len;
        }
        (out, changed)
    }

    /// The first identifier in `expr`, or in the macros it names, that is not defined.
    fn first_undefined(&self, expr: &str) -> Option<String> {
        let mut pending: Vec<String> = tokenize(expr).ok()?;
        let mut seen = 0;
        while let Some(token) = pending.pop() {
            seen += 1;
            if seen > 4096 || !token.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                continue;
            }
            match self.macros.get(&token) {
                Some(value) => pending.extend(tokenize(value).ok()?),
                None if token != "defined" => return Some(token),
                None => {}
            }
        }
        None
    }

    fn eval(&self, expr: &str) -> Result<i64, String> {
        let tokens = tokenize(expr)?;
        let mut parser = ExprParser {
            tokens: &tokens,
            pos: 0,
            pp: self,
            depth: 0,
        };
        let value = parser.or()?;
        if parser.pos != tokens.len() {
            return Err(format!("unexpected `{}` in `{expr}`", tokens[parser.pos]));
        }
        Ok(value)
    }
}

/// Joins the tokens around each `##` (and the whitespace next to it). Comments are left alone.
fn paste(line: &str) -> String {
    let (code, comment) = match line.find("//") {
        Some(at) => line.split_at(at),
        None => (line, ""),
    };
    if !code.contains("##") {
        return line.to_owned();
    }
    let pieces: Vec<&str> = code.split("##").collect();
    let mut out = String::with_capacity(line.len());
    for (i, piece) in pieces.iter().enumerate() {
        let mut piece = *piece;
        if i > 0 {
            piece = piece.trim_start();
        }
        if i + 1 < pieces.len() {
            piece = piece.trim_end();
        }
        out.push_str(piece);
    }
    out.push_str(comment);
    out
}

fn tokenize(expr: &str) -> Result<Vec<String>, String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(chars[start..i].iter().collect());
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            if ["&&", "||", "==", "!=", "<=", ">="].contains(&two.as_str()) {
                tokens.push(two);
                i += 2;
            } else if "()!<>+-*/%".contains(c) {
                tokens.push(c.to_string());
                i += 1;
            } else {
                return Err(format!("unexpected character `{c}` in `{expr}`"));
            }
        }
    }
    Ok(tokens)
}

struct ExprParser<'a> {
    tokens: &'a [String],
    pos: usize,
    pp: &'a Preprocessor,
    depth: usize,
}

impl ExprParser<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.pos).map(String::as_str)
    }

    fn eat(&mut self, token: &str) -> bool {
        if self.peek() == Some(token) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn binary(&mut self, ops: &[&str], next: fn(&mut Self) -> Result<i64, String>) -> Result<i64, String> {
        let mut left = next(self)?;
        while let Some(op) = self.peek().filter(|t| ops.contains(t)).map(str::to_owned) {
            self.pos += 1;
            let right = next(self)?;
            left = match op.as_str() {
                "||" => i64::from(left != 0 || right != 0),
                "&&" => i64::from(left != 0 && right != 0),
                "==" => i64::from(left == right),
                "!=" => i64::from(left != right),
                "<" => i64::from(left < right),
                "<=" => i64::from(left <= right),
                ">" => i64::from(left > right),
                ">=" => i64::from(left >= right),
                "+" => left.wrapping_add(right),
                "-" => left.wrapping_sub(right),
                "*" => left.wrapping_mul(right),
                "/" | "%" if right == 0 => return Err("division by zero in #if".into()),
                "/" => left / right,
                _ => left % right,
            };
        }
        Ok(left)
    }

    fn or(&mut self) -> Result<i64, String> {
        self.binary(&["||"], Self::and)
    }
    fn and(&mut self) -> Result<i64, String> {
        self.binary(&["&&"], Self::equality)
    }
    fn equality(&mut self) -> Result<i64, String> {
        self.binary(&["==", "!="], Self::relational)
    }
    fn relational(&mut self) -> Result<i64, String> {
        self.binary(&["<", "<=", ">", ">="], Self::additive)
    }
    fn additive(&mut self) -> Result<i64, String> {
        self.binary(&["+", "-"], Self::multiplicative)
    }
    fn multiplicative(&mut self) -> Result<i64, String> {
        self.binary(&["*", "/", "%"], Self::unary)
    }

    fn unary(&mut self) -> Result<i64, String> {
        if self.eat("!") {
            return Ok(i64::from(self.unary()? == 0));
        }
        if self.eat("-") {
            return Ok(self.unary()?.wrapping_neg());
        }
        if self.eat("(") {
            let v = self.or()?;
            return if self.eat(")") {
                Ok(v)
            } else {
                Err("missing `)`".into())
            };
        }
        let token = self.peek().ok_or("expression ends early")?.to_owned();
        self.pos += 1;
        if token == "defined" {
            let paren = self.eat("(");
            let name = self.peek().ok_or("defined() without a name")?.to_owned();
            self.pos += 1;
            if paren && !self.eat(")") {
                return Err("missing `)` after defined(".into());
            }
            return Ok(i64::from(self.pp.macros.contains_key(&name)));
        }
        parse_number(&token)
            .or_else(|| self.macro_value(&token))
            .ok_or_else(|| format!("`{token}` is not a number"))
    }

    /// An identifier's value in an expression: its macro's value, or 0 when undefined.
    fn macro_value(&mut self, name: &str) -> Option<i64> {
        if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            return None;
        }
        let Some(value) = self.pp.macros.get(name) else {
            return Some(0);
        };
        if self.depth > 16 {
            return None;
        }
        let tokens = tokenize(value).ok()?;
        let mut inner = ExprParser {
            tokens: &tokens,
            pos: 0,
            pp: self.pp,
            depth: self.depth + 1,
        };
        inner.or().ok()
    }
}

fn parse_number(token: &str) -> Option<i64> {
    let digits = token.trim_end_matches(['u', 'i']);
    if let Some(hex) = digits.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()
    } else {
        digits.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(text: &str, defines: &[(&str, &str)]) -> Result<String, PreprocessError> {
        let mut pp = Preprocessor {
            macros: HashMap::new(),
            fixed: defines.iter().map(|(k, _)| (*k).to_owned()).collect(),
        };
        for (k, v) in defines {
            pp.macros.insert((*k).to_owned(), (*v).to_owned());
        }
        let mut out = String::new();
        pp.process("test", text, &mut out, 0)?;
        Ok(out)
    }

    #[test]
    fn conditionals_and_expressions() {
        let text = "#if TILE >= 16 && defined(F16)\nbig\n#elif TILE == 8\nsmall\n#else\nother\n#endif\n";
        assert_eq!(render(text, &[("TILE", "32u"), ("F16", "1")]).unwrap(), "big\n");
        assert_eq!(render(text, &[("TILE", "8u")]).unwrap(), "small\n");
        assert_eq!(render(text, &[("TILE", "(2 + 2) * 1")]).unwrap(), "other\n");
        let nested = "#ifdef A\n#ifndef B\nx\n#else\ny\n#endif\n#endif\nz\n";
        assert_eq!(render(nested, &[("A", "1")]).unwrap(), "x\nz\n");
        assert_eq!(render(nested, &[]).unwrap(), "z\n");
    }

    #[test]
    fn host_defines_win_and_macros_expand_recursively() {
        let text = "#define TILE 4u\n#define WIDE (TILE * 2u)\nconst w = WIDE; // TILE stays in comments\n";
        assert_eq!(
            render(text, &[("TILE", "8u")]).unwrap(),
            "const w = (8u * 2u); // TILE stays in comments\n"
        );
        assert_eq!(
            render(text, &[]).unwrap(),
            "const w = (4u * 2u); // TILE stays in comments\n"
        );
        assert_eq!(
            render("let x = 1e3f + TILE;\n", &[("TILE", "2.0")]).unwrap(),
            "let x = 1e3f + 2.0;\n"
        );
    }

    #[test]
    fn tokens_paste_after_expansion() {
        let text = "#define P k\nfn P##_value() {}\nlet x = P ## _block; // P##_kept\n";
        assert_eq!(
            render(text, &[]).unwrap(),
            "fn k_value() {}\nlet x = k_block; // P##_kept\n"
        );
    }

    #[test]
    fn errors_name_file_and_line() {
        let err = render("a\n#if 1\nb\n", &[]).unwrap_err();
        assert_eq!(err.line, 3);
        assert!(render("#else\n", &[]).unwrap_err().message.contains("without #if"));
        assert!(
            render("#pragma x\n", &[])
                .unwrap_err()
                .message
                .contains("unknown directive")
        );
        assert!(render("#if 1 / 0\n#endif\n", &[]).is_err());
        assert!(
            render("#include \"nope.wgsl\"\n", &[])
                .unwrap_err()
                .message
                .contains("nope.wgsl")
        );
        assert!(render("#define A A B\nA\n", &[]).is_err(), "self-referencing macro");
    }

    #[test]
    fn every_embedded_source_renders_with_defaults() {
        for (name, _) in SOURCES {
            ShaderVariant::new(name).render().unwrap_or_else(|e| panic!("{e}"));
        }
    }

    #[test]
    fn every_shader_file_is_embedded_once() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
        let mut files = Vec::new();
        for group in std::fs::read_dir(&root).unwrap() {
            for file in std::fs::read_dir(group.unwrap().path()).unwrap() {
                let name = file.unwrap().file_name().into_string().unwrap();
                if name.ends_with(".wgsl") {
                    files.push(name);
                }
            }
        }
        files.sort();
        let mut embedded: Vec<String> = SOURCES.iter().map(|(n, _)| (*n).to_owned()).collect();
        embedded.sort();
        assert_eq!(files, embedded, "every file under backend/shaders/, each once");
    }

    #[test]
    fn variant_keys_are_readable() {
        let v = ShaderVariant::new("dequantize.wgsl")
            .define("SRC_TYPE", "q4_0")
            .flag("VEC", true)
            .flag("OFF", false);
        assert_eq!(v.to_string(), "dequantize,SRC_TYPE=q4_0,VEC=1");
    }

    #[test]
    fn for_unrolls_with_constants_and_nests() {
        let text = "#for I in 0..N\n#for J in 1..3\nacc[I * 2 + J] = I;\n#endfor\n#endfor\nI";
        let out = render(text, &[("N", "2u")]).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                "acc[0 * 2 + 1] = 0;",
                "acc[0 * 2 + 2] = 0;",
                "acc[1 * 2 + 1] = 1;",
                "acc[1 * 2 + 2] = 1;",
                "I"
            ]
        );
        // The body's own conditionals see the value.
        let out = render("#for I in 0..3\n#if I != 1\nx I\n#endif\n#endfor", &[]).unwrap();
        assert_eq!(out, "x 0\nx 2\n");
        assert!(render("#for I in 0..2\nx\n", &[]).is_err());
        assert!(render("#endfor\n", &[]).is_err());
        assert!(render("#for I 0..2\n#endfor\n", &[]).is_err());
        // A bound that names nothing defined (a WGSL const, say) is an error, not zero trips.
        assert!(render("#for I in 0..COUNT\nx\n#endfor\n", &[]).is_err());
        assert!(render("#for I in 0..N\nx\n#endfor\n", &[("N", "(M * 2u)")]).is_err());
    }
}

#[cfg(test)]
#[path = "../build/strip_probes.rs"]
mod strip_probes;

#[cfg(test)]
mod probe_tests {
    use super::strip_probes::strip_probes;

    #[test]
    fn probe_branches_are_resolved_as_if_undefined_keeping_line_numbers() {
        let src = "a\n#ifdef PROBE_X\np1\n#elif defined(OTHER)\n#error nested ordinary chain\n#else\nb\n#endif\n";
        assert!(strip_probes(src).unwrap_err().contains("line 4"));
        let src = "\
a
#ifdef PROBE_LOADS
probe
#else
#ifdef KQ
k
#else
plain
#endif
#endif
#ifndef PROBE_STAGING
staged
#endif
#if PROBE == 2
two
#elif PROBE == 1
one
#else
kernel
#endif
#if VEC_PROBE != 1
not_one
#endif
#ifdef PROBE_X
#ifdef INNER
gone
#endif
#endif
z
";
        let out = strip_probes(src).unwrap();
        assert_eq!(out.lines().count(), src.lines().count());
        let kept: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(
            kept,
            [
                "a",
                "#ifdef KQ",
                "k",
                "#else",
                "plain",
                "#endif",
                "staged",
                "kernel",
                "not_one",
                "z"
            ]
        );
    }

    #[test]
    fn mixed_or_unbalanced_probe_conditions_are_errors() {
        for (src, says) in [
            ("#if KV_ALIAS && PROBE != 2\nx\n#endif\n", "mixes"),
            ("#if A\n#elif PROBE == 1\n#endif\n", "nest"),
            ("#ifdef PROBE_X\nx\n", "not closed"),
            ("#endif\n", "without"),
            ("#if PROBE + 1\n#endif\n", "not understood"),
        ] {
            let e = strip_probes(src).unwrap_err();
            assert!(e.contains(says), "{src}: {e}");
        }
    }

    /// Without the `probes` feature the embedded sources hold no probe conditional.
    #[cfg(not(feature = "probes"))]
    #[test]
    fn the_library_embeds_no_probe_code() {
        for name in super::SOURCE_NAMES {
            let text = super::source(name).unwrap();
            for line in text.lines() {
                let t = line.trim_start();
                assert!(!(t.starts_with('#') && t.contains("PROBE")), "{name}: {line}");
            }
        }
    }
}
