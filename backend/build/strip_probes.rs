//! Removes measurement-only probe code from a WGSL source: every conditional of the shader
//! preprocessor (`#if`, `#ifdef`, `#ifndef`, `#elif`) whose condition names a macro containing
//! `PROBE` is resolved as if every such macro were undefined (0), keeping the branch a build
//! without probes takes and blanking the rest (so line numbers stay those of the source).
//! A probe condition must name probe macros only (`#if PROBE == 2`, `#ifdef PROBE_LOADS`,
//! `#if VEC_PROBE != 1`); one that mixes them with other macros, or an `#elif` naming a probe
//! in a chain that did not start with one, is an error: nest the conditionals instead.
//!
//! Shared by the build script (which writes the stripped sources the library embeds when the
//! `probes` feature is off) and the library's tests.

/// The source without its probe branches, or the first error (`line: message`).
pub fn strip_probes(source: &str) -> Result<String, String> {
    // Per open conditional: `None` for an ordinary one (passed through), or for a probe
    // conditional (whether its current branch is kept, whether a branch was taken).
    let mut stack: Vec<Option<(bool, bool)>> = Vec::new();
    let mut out = String::with_capacity(source.len());
    for (i, line) in source.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}", i + 1);
        let emitting = stack.iter().all(|f| f.is_none_or(|(keep, _)| keep));
        let trimmed = line.trim_start();
        let (directive, rest) = match trimmed.strip_prefix('#') {
            Some(d) => {
                let name_len = d.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(d.len());
                (&d[..name_len], d[name_len..].trim())
            }
            None => ("", ""),
        };
        let keep_line = match directive {
            "if" | "ifdef" | "ifndef" => {
                let condition = match directive {
                    "ifdef" => format!("defined({rest})"),
                    "ifndef" => format!("!defined({rest})"),
                    _ => rest.to_owned(),
                };
                if names_probe(&condition) {
                    let value = eval_probe_condition(&condition).map_err(at)?;
                    stack.push(Some((value, value)));
                    false
                } else {
                    stack.push(None);
                    emitting
                }
            }
            "elif" => match stack.last_mut() {
                Some(Some((keep, taken))) => {
                    let value = eval_probe_condition(rest).map_err(at)?;
                    *keep = !*taken && value;
                    *taken |= value;
                    false
                }
                Some(None) if names_probe(rest) => {
                    return Err(at(
                        "an #elif naming a probe after an ordinary #if: nest the conditionals".into(),
                    ));
                }
                Some(None) => emitting,
                None => return Err(at("#elif without #if".into())),
            },
            "else" => match stack.last_mut() {
                Some(Some((keep, taken))) => {
                    *keep = !*taken;
                    *taken = true;
                    false
                }
                Some(None) => emitting,
                None => return Err(at("#else without #if".into())),
            },
            "endif" => match stack.pop() {
                Some(Some(_)) => false,
                Some(None) => emitting,
                None => return Err(at("#endif without #if".into())),
            },
            _ => emitting,
        };
        if keep_line {
            out.push_str(line);
        }
        out.push('\n');
    }
    if !stack.is_empty() {
        return Err("a conditional is not closed".into());
    }
    Ok(out)
}

fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
}

fn names_probe(condition: &str) -> bool {
    identifiers(condition).any(|w| w.contains("PROBE"))
}

/// A probe condition's value with every probe macro undefined (0).
fn eval_probe_condition(condition: &str) -> Result<bool, String> {
    if let Some(other) = identifiers(condition).find(|w| *w != "defined" && !w.contains("PROBE")) {
        return Err(format!(
            "`{condition}` mixes a probe with `{other}`: nest the conditionals"
        ));
    }
    // `defined(X)` and every macro are 0; what is left is integers and operators.
    let mut text = condition.replace("defined", "");
    for w in identifiers(condition).filter(|w| w.contains("PROBE")) {
        text = text.replace(w, "0");
    }
    let tokens = tokenize(&text)?;
    let mut p = Parser { tokens: &tokens, at: 0 };
    let v = p.or()?;
    if p.at != tokens.len() {
        return Err(format!("`{condition}`: unexpected `{}`", tokens[p.at]));
    }
    Ok(v != 0)
}

fn tokenize(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_alphanumeric() {
                i += 1;
            }
            out.push(
                chars[start..i]
                    .iter()
                    .collect::<String>()
                    .trim_end_matches('u')
                    .to_owned(),
            );
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            if ["==", "!=", "<=", ">=", "&&", "||"].contains(&two.as_str()) {
                out.push(two);
                i += 2;
            } else if "()!<>".contains(c) {
                out.push(c.to_string());
                i += 1;
            } else {
                return Err(format!("`{text}`: `{c}` is not understood in a probe condition"));
            }
        }
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: &'a [String],
    at: usize,
}

impl Parser<'_> {
    fn eat(&mut self, t: &str) -> bool {
        let hit = self.tokens.get(self.at).is_some_and(|x| x == t);
        if hit {
            self.at += 1;
        }
        hit
    }

    fn or(&mut self) -> Result<i64, String> {
        let mut v = self.and()?;
        while self.eat("||") {
            let r = self.and()?;
            v = i64::from(v != 0 || r != 0);
        }
        Ok(v)
    }

    fn and(&mut self) -> Result<i64, String> {
        let mut v = self.compare()?;
        while self.eat("&&") {
            let r = self.compare()?;
            v = i64::from(v != 0 && r != 0);
        }
        Ok(v)
    }

    fn compare(&mut self) -> Result<i64, String> {
        let l = self.unary()?;
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if self.eat(op) {
                let r = self.unary()?;
                return Ok(i64::from(match op {
                    "==" => l == r,
                    "!=" => l != r,
                    "<=" => l <= r,
                    ">=" => l >= r,
                    "<" => l < r,
                    _ => l > r,
                }));
            }
        }
        Ok(l)
    }

    fn unary(&mut self) -> Result<i64, String> {
        if self.eat("!") {
            return Ok(i64::from(self.unary()? == 0));
        }
        if self.eat("(") {
            let v = self.or()?;
            if !self.eat(")") {
                return Err("a `(` is not closed".into());
            }
            return Ok(v);
        }
        let t = self.tokens.get(self.at).ok_or("an operand is missing")?;
        self.at += 1;
        t.parse().map_err(|_| format!("`{t}` is not a number"))
    }
}
