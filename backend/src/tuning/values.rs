//! Knob types beyond the scalars: pairs, thresholds that may be off, and the small per-format
//! tables that hold rules measured per format and number of columns.

use std::fmt;

use super::knob::{Check, Knob};
use crate::ggml_type::GgmlType;

/// Two values of one kind, written `a/b` (each checked against the knob's [`Check`]): a size
/// along m and along n, or a value for few columns and for more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pair(pub u32, pub u32);

impl Knob for Pair {
    fn parse_knob(text: &str) -> Result<Self, String> {
        let (a, b) = text
            .split_once('/')
            .ok_or_else(|| format!("`{text}` is not a pair a/b"))?;
        Ok(Pair(u32::parse_knob(a)?, u32::parse_knob(b)?))
    }

    fn write_knob(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.0, self.1)
    }

    fn check_knob(&self, check: &Check) -> Result<(), String> {
        self.0.check_knob(check)?;
        self.1.check_knob(check)
    }
}

/// A threshold on the number of columns n: from some n on, or `never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FromN {
    Never,
    From(u32),
}

impl FromN {
    /// Whether `n` is at or past the threshold.
    pub fn reached(self, n: u64) -> bool {
        match self {
            FromN::Never => false,
            FromN::From(from) => n >= u64::from(from),
        }
    }
}

impl Knob for FromN {
    fn parse_knob(text: &str) -> Result<Self, String> {
        if text == "never" {
            Ok(FromN::Never)
        } else {
            u32::parse_knob(text).map(FromN::From)
        }
    }

    fn write_knob(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FromN::Never => f.write_str("never"),
            FromN::From(n) => write!(f, "{n}"),
        }
    }

    fn check_knob(&self, check: &Check) -> Result<(), String> {
        match self {
            FromN::Never => Ok(()),
            FromN::From(n) => n.check_knob(check),
        }
    }
}

const _: () = assert!(GgmlType::ALL.len() <= 64, "a TypeSet holds a bit per format");

/// A set of formats, written as their names joined by `+` (`q4_K+q5_K`), `none` or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TypeSet(u64);

impl TypeSet {
    pub const NONE: TypeSet = TypeSet(0);
    pub const ALL: TypeSet = TypeSet(u64::MAX);

    /// The set of `types`.
    pub const fn of(types: &[GgmlType]) -> TypeSet {
        let mut bits = 0u64;
        let mut i = 0;
        while i < types.len() {
            bits |= 1 << types[i] as u32;
            i += 1;
        }
        TypeSet(bits)
    }

    pub fn contains(self, ty: GgmlType) -> bool {
        self.0 & (1 << ty as u32) != 0
    }
}

impl Knob for TypeSet {
    fn parse_knob(text: &str) -> Result<Self, String> {
        match text {
            "none" => Ok(TypeSet::NONE),
            "all" => Ok(TypeSet::ALL),
            _ => {
                let mut set = TypeSet::NONE;
                for name in text.split('+') {
                    let ty: GgmlType = name.parse().map_err(|_| format!("`{name}` is not a ggml type"))?;
                    set.0 |= 1 << ty as u32;
                }
                Ok(set)
            }
        }
    }

    fn write_knob(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == TypeSet::ALL {
            return f.write_str("all");
        }
        let names: Vec<&str> = GgmlType::ALL
            .iter()
            .filter(|t| self.contains(**t))
            .map(|t| t.name())
            .collect();
        f.write_str(if names.is_empty() { "none" } else { "" })?;
        f.write_str(&names.join("+"))
    }
}

/// Formats each at some numbers of columns (n from 1 to 64), written `q4_0@2/4+q5_0@1/2`
/// (`q4_0@*`: every n), `none` or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TypeNs {
    /// (format, bit n-1 per n), at most 8 formats; `all` is every format at every n.
    entries: [(Option<GgmlType>, u64); 8],
    all: bool,
}

impl TypeNs {
    pub const NONE: TypeNs = TypeNs {
        entries: [(None, 0); 8],
        all: false,
    };
    pub const ALL: TypeNs = TypeNs {
        entries: [(None, 0); 8],
        all: true,
    };

    /// The table of `(format, its ns)`, at most 8 formats, each n in 1..=64.
    pub const fn of(rows: &[(GgmlType, &[u32])]) -> TypeNs {
        let mut t = TypeNs::NONE;
        let mut i = 0;
        while i < rows.len() {
            let mut bits = 0u64;
            let mut j = 0;
            while j < rows[i].1.len() {
                bits |= 1 << (rows[i].1[j] - 1);
                j += 1;
            }
            t.entries[i] = (Some(rows[i].0), bits);
            i += 1;
        }
        t
    }

    pub fn contains(&self, ty: GgmlType, n: u64) -> bool {
        self.all
            || (1..=64).contains(&n)
                && self
                    .entries
                    .iter()
                    .any(|&(t, bits)| t == Some(ty) && bits & (1 << (n - 1)) != 0)
    }
}

impl Knob for TypeNs {
    fn parse_knob(text: &str) -> Result<Self, String> {
        match text {
            "none" => return Ok(TypeNs::NONE),
            "all" => return Ok(TypeNs::ALL),
            _ => {}
        }
        let mut t = TypeNs::NONE;
        for (i, item) in text.split('+').enumerate() {
            let (name, ns) = item
                .split_once('@')
                .ok_or_else(|| format!("`{item}` is not format@n/n/…"))?;
            let ty: GgmlType = name.parse().map_err(|_| format!("`{name}` is not a ggml type"))?;
            let bits = if ns == "*" {
                u64::MAX
            } else {
                let mut bits = 0u64;
                for n in ns.split('/') {
                    match n.parse::<u32>() {
                        Ok(n @ 1..=64) => bits |= 1 << (n - 1),
                        _ => return Err(format!("`{n}` is not an n in 1..=64")),
                    }
                }
                bits
            };
            if t.entries.iter().any(|(e, _)| *e == Some(ty)) {
                return Err(format!("`{name}` is given twice"));
            }
            *t.entries.get_mut(i).ok_or("at most 8 formats")? = (Some(ty), bits);
        }
        Ok(t)
    }

    fn write_knob(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.all {
            return f.write_str("all");
        }
        let items: Vec<String> = self
            .entries
            .iter()
            .filter_map(|&(t, bits)| {
                let t = t?;
                let ns = if bits == u64::MAX {
                    "*".to_owned()
                } else {
                    (1..=64u32)
                        .filter(|n| bits & (1 << (n - 1)) != 0)
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join("/")
                };
                Some(format!("{}@{ns}", t.name()))
            })
            .collect();
        f.write_str(if items.is_empty() { "none" } else { "" })?;
        f.write_str(&items.join("+"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::knob::knob_text;

    #[test]
    fn tables_read_what_they_write() {
        let t = TypeNs::of(&[(GgmlType::Q4_0, &[2, 4]), (GgmlType::Q5_0, &[1, 2, 4, 5])]);
        assert_eq!(knob_text(&t), "q4_0@2/4+q5_0@1/2/4/5");
        assert_eq!(TypeNs::parse_knob(&knob_text(&t)), Ok(t));
        assert!(t.contains(GgmlType::Q4_0, 4) && !t.contains(GgmlType::Q4_0, 3) && !t.contains(GgmlType::Q8_0, 2));
        assert!(!t.contains(GgmlType::Q4_0, 0) && !t.contains(GgmlType::Q4_0, 65));
        let every = TypeNs::parse_knob("q8_0@*").unwrap();
        assert!(every.contains(GgmlType::Q8_0, 64) && knob_text(&every) == "q8_0@*");
        assert!(TypeNs::ALL.contains(GgmlType::F16, 7) && !TypeNs::NONE.contains(GgmlType::F16, 7));
        for bad in ["q4_0", "q4_0@0", "q4_0@65", "nope@1", "q4_0@1+q4_0@2"] {
            assert!(TypeNs::parse_knob(bad).is_err(), "{bad}");
        }
        let s = TypeSet::of(&[GgmlType::Q4_K, GgmlType::Q6_K]);
        assert_eq!(knob_text(&s), "q4_K+q6_K");
        assert_eq!(TypeSet::parse_knob("q4_K+q6_K"), Ok(s));
        assert_eq!(knob_text(&TypeSet::NONE), "none");
        assert!(TypeSet::parse_knob("all").unwrap().contains(GgmlType::IQ1_M));
        assert!(TypeSet::parse_knob("q9_K").is_err());
        assert_eq!(Pair::parse_knob("4/16"), Ok(Pair(4, 16)));
        assert!(Pair(4, 100).check_knob(&Check::range(1, 64)).is_err());
        assert_eq!(FromN::parse_knob("never"), Ok(FromN::Never));
        assert!(FromN::From(9).reached(9) && !FromN::From(9).reached(8) && !FromN::Never.reached(u64::MAX));
    }
}
