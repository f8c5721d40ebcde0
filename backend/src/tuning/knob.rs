//! One way to declare an op's tuning: the [`Knob`] trait (a value's text form and its checks)
//! and the [`knobs!`](crate::knobs) macro, which declares a tuning struct once (each field with
//! its doc comment, type and optional [`Check`]) and generates its text form, so that a knob is
//! written in one place. Field names are the text keys (`name=value,…`).

use std::fmt;

/// A knob's value: parsed from and written as text, and checked against a [`Check`].
pub trait Knob: Sized {
    /// Reads the value from its text form (without the name).
    fn parse_knob(text: &str) -> Result<Self, String>;
    /// Writes the value in the form [`Knob::parse_knob`] reads.
    fn write_knob(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
    /// Checks the value against `check` (values without a number pass).
    fn check_knob(&self, check: &Check) -> Result<(), String> {
        let _ = check;
        Ok(())
    }
}

/// What a numeric knob's value must be: within `lo..=hi`, and optionally a power of two or a
/// multiple of some number. Written in `knobs!` as `[range(1, 1024).pow2()]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Check {
    pub lo: f64,
    pub hi: f64,
    pub pow2: bool,
    pub multiple_of: u32,
}

impl Check {
    /// Values in `lo..=hi`.
    pub const fn range(lo: u32, hi: u32) -> Check {
        Check {
            lo: lo as f64,
            hi: hi as f64,
            pow2: false,
            multiple_of: 1,
        }
    }

    /// Real values in `lo..=hi` (for `f32` knobs).
    pub const fn range_f(lo: f64, hi: f64) -> Check {
        Check {
            lo,
            hi,
            pow2: false,
            multiple_of: 1,
        }
    }

    /// ... and a power of two.
    pub const fn pow2(self) -> Check {
        Check { pow2: true, ..self }
    }

    /// ... and a multiple of `m`.
    pub const fn multiple_of(self, m: u32) -> Check {
        Check { multiple_of: m, ..self }
    }

    fn check_u32(&self, v: u32) -> Result<(), String> {
        if !(self.lo..=self.hi).contains(&f64::from(v)) {
            return Err(format!("must be in {}..={}", self.lo, self.hi));
        }
        if self.pow2 && !v.is_power_of_two() {
            return Err("must be a power of two".into());
        }
        if self.multiple_of > 1 && !v.is_multiple_of(self.multiple_of) {
            return Err(format!("must be a multiple of {}", self.multiple_of));
        }
        Ok(())
    }
}

impl Knob for u32 {
    fn parse_knob(text: &str) -> Result<Self, String> {
        text.parse()
            .map_err(|_| format!("`{text}` is not a non-negative 32-bit integer"))
    }

    fn write_knob(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }

    fn check_knob(&self, check: &Check) -> Result<(), String> {
        check.check_u32(*self)
    }
}

impl Knob for bool {
    fn parse_knob(text: &str) -> Result<Self, String> {
        match text {
            "1" | "true" | "on" => Ok(true),
            "0" | "false" | "off" => Ok(false),
            _ => Err(format!("`{text}` is not 0 or 1")),
        }
    }

    fn write_knob(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if *self { "1" } else { "0" })
    }
}

impl Knob for f32 {
    fn parse_knob(text: &str) -> Result<Self, String> {
        match text.parse::<f32>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(format!("`{text}` is not a finite number")),
        }
    }

    fn write_knob(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }

    fn check_knob(&self, check: &Check) -> Result<(), String> {
        if !self.is_finite() {
            return Err("must be a finite number".into());
        }
        if !(check.lo..=check.hi).contains(&f64::from(*self)) {
            return Err(format!("must be in {}..={}", check.lo, check.hi));
        }
        Ok(())
    }
}

/// `auto` (`None`): chosen from the problem's shape by the planner, for the few knobs whose
/// best value is a function of the shape rather than of the device.
impl<T: Knob> Knob for Option<T> {
    fn parse_knob(text: &str) -> Result<Self, String> {
        if text == "auto" {
            Ok(None)
        } else {
            T::parse_knob(text).map(Some)
        }
    }

    fn write_knob(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Some(v) => v.write_knob(f),
            None => f.write_str("auto"),
        }
    }

    fn check_knob(&self, check: &Check) -> Result<(), String> {
        self.as_ref().map_or(Ok(()), |v| v.check_knob(check))
    }
}

/// A knob's value as text (what [`Knob::write_knob`] writes).
pub fn knob_text<T: Knob>(value: &T) -> String {
    struct Text<'a, T>(&'a T);
    impl<T: Knob> fmt::Display for Text<'_, T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.write_knob(f)
        }
    }
    Text(value).to_string()
}

/// The `name=value` items of an overrides text (separated by commas or spaces), refusing an
/// item without `=` and a name given twice.
pub fn items(text: &str) -> Result<Vec<(&str, &str)>, String> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for item in text.split([',', ' ']).map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| format!("`{item}` is not name=value"))?;
        let name = name.trim();
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!("`{name}` is given twice"));
        }
        out.push((name, value.trim()));
    }
    Ok(out)
}

/// Declares an enum of named choices that is a [`Knob`] (its text is the name given to each
/// variant):
///
/// ```
/// ggml_dawn::knob_enum! {
///     /// Which kernel to force.
///     pub enum Force { Simple = "simple", Tile = "tile" }
/// }
/// # use ggml_dawn::tuning::knob::Knob;
/// assert_eq!(Force::parse_knob("tile"), Ok(Force::Tile));
/// assert!(Force::parse_knob("mma").unwrap_err().contains("simple, tile"));
/// ```
#[macro_export]
macro_rules! knob_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// Every choice's text.
            pub const NAMES: &'static [&'static str] = &[$($text),*];
        }

        impl $crate::tuning::knob::Knob for $name {
            fn parse_knob(text: &str) -> ::std::result::Result<Self, ::std::string::String> {
                match text {
                    $($text => Ok($name::$variant),)*
                    _ => Err(format!("`{text}` is none of {}", $name::NAMES.join(", "))),
                }
            }

            fn write_knob(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(match self {
                    $($name::$variant => $text,)*
                })
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                $crate::tuning::knob::Knob::write_knob(self, f)
            }
        }
    };
}

/// Declares an op's tuning struct once: each field with its doc comment, an optional
/// `#[cfg(…)]` (e.g. probes behind a feature), its type (any [`Knob`]) and an optional
/// [`Check`] in brackets (`[range(1, 1024).pow2()]`, `[range(0, 64).multiple_of(8)]`). It
/// generates `NAMES`, `set(name, value)`, `apply(text)` (`name=value,…`; an unknown name is
/// refused with the known ones, a name given twice is refused, the result is validated),
/// `values()` (names and values as text), `validate()` and `Display` (the text `apply` reads).
/// The struct's values themselves come from elsewhere (a device's profile).
///
/// ```
/// ggml_dawn::knobs! {
///     #[derive(Debug, Clone, Copy, PartialEq)]
///     pub struct Example {
///         /// Threads per workgroup.
///         threads: u32 [range(1, 1024).pow2()],
///         /// Prefetch the next step.
///         prefetch: bool,
///     }
/// }
/// let mut e = Example { threads: 64, prefetch: false };
/// e.apply("threads=128,prefetch=1").unwrap();
/// assert_eq!(e.to_string(), "threads=128,prefetch=1");
/// assert!(e.apply("threads=100").unwrap_err().contains("power of two"));
/// ```
#[macro_export]
macro_rules! knobs {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:expr])*
                $(#[cfg($cfg:meta)])?
                $field:ident : $ty:ty $([$($check:tt)*])?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                $(#[doc = $doc])*
                $(#[cfg($cfg)])?
                pub $field: $ty,
            )*
        }

        #[allow(dead_code)]
        impl $name {
            /// The knobs' names (their text keys), in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($(#[cfg($cfg)])? stringify!($field),)*];

            /// Sets one knob from its text value (not validated against the others: see
            /// [`Self::apply`]).
            pub fn set(&mut self, name: &str, value: &str) -> ::std::result::Result<(), ::std::string::String> {
                match name {
                    $(
                        $(#[cfg($cfg)])?
                        stringify!($field) => {
                            let v = <$ty as $crate::tuning::knob::Knob>::parse_knob(value)
                                .map_err(|e| format!("{name}: {e}"))?;
                            $(
                                $crate::tuning::knob::Knob::check_knob(&v, &$crate::tuning::knob::Check::$($check)*)
                                    .map_err(|e| format!("{name}={value}: {e}"))?;
                            )?
                            self.$field = v;
                            Ok(())
                        }
                    )*
                    _ => Err(format!("unknown knob `{name}` (known: {})", Self::NAMES.join(", "))),
                }
            }

            /// Applies `name=value` overrides (comma- or space-separated) on top of these
            /// values, then validates the whole; on an error `self` is unchanged.
            pub fn apply(&mut self, text: &str) -> ::std::result::Result<(), ::std::string::String> {
                let mut next = self.clone();
                for (name, value) in $crate::tuning::knob::items(text)? {
                    next.set(name, value)?;
                }
                next.validate()?;
                *self = next;
                Ok(())
            }

            /// Every knob's name and value as text.
            pub fn values(&self) -> ::std::vec::Vec<(&'static str, ::std::string::String)> {
                ::std::vec![$($(#[cfg($cfg)])? (stringify!($field), $crate::tuning::knob::knob_text(&self.$field)),)*]
            }

            /// Checks every knob against its range (values built in code, not parsed); the
            /// error names the knob.
            pub fn validate(&self) -> ::std::result::Result<(), ::std::string::String> {
                $(
                    $(#[cfg($cfg)])?
                    {
                        $(
                            $crate::tuning::knob::Knob::check_knob(&self.$field, &$crate::tuning::knob::Check::$($check)*)
                                .map_err(|e| format!("{}={}: {e}", stringify!($field), $crate::tuning::knob::knob_text(&self.$field)))?;
                        )?
                    }
                )*
                Ok(())
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let mut first = true;
                for (name, value) in self.values() {
                    if !first {
                        f.write_str(",")?;
                    }
                    first = false;
                    write!(f, "{name}={value}")?;
                }
                Ok(())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::knob_enum! {
        /// A test choice.
        enum Mode { Fast = "fast", Safe = "safe" }
    }

    crate::knobs! {
        /// A test tuning.
        #[derive(Debug, Clone, Copy, PartialEq)]
        struct Test {
            /// A power of two.
            wg: u32 [range(1, 1024).pow2()],
            /// A multiple of 8.
            pad: u32 [range(0, 64).multiple_of(8)],
            /// A switch.
            on: bool,
            /// A real number.
            tau: f32 [range_f(0.0, 100.0)],
            /// Auto or a number.
            split: Option<u32> [range(1, 16)],
            /// A named choice.
            mode: Mode,
            /// Not in this build.
            #[cfg(any())]
            never: u32,
        }
    }

    fn base() -> Test {
        Test {
            wg: 64,
            pad: 8,
            on: false,
            tau: 8.0,
            split: None,
            mode: Mode::Fast,
        }
    }

    #[test]
    fn names_values_and_display_round_trip() {
        assert_eq!(Test::NAMES, ["wg", "pad", "on", "tau", "split", "mode"]);
        let t = base();
        assert_eq!(t.to_string(), "wg=64,pad=8,on=0,tau=8,split=auto,mode=fast");
        let mut u = Test {
            wg: 1,
            pad: 0,
            on: true,
            tau: 0.5,
            split: Some(3),
            mode: Mode::Safe,
        };
        u.apply(&t.to_string()).unwrap();
        assert_eq!(u, t);
        assert_eq!(t.values()[4], ("split", "auto".to_owned()));
    }

    #[test]
    fn apply_sets_checks_and_refuses_nonsense_leaving_the_values() {
        let mut t = base();
        t.apply("wg=256, on=1 split=4,mode=safe,tau=0.25").unwrap();
        assert_eq!(
            (t.wg, t.on, t.split, t.mode, t.tau),
            (256, true, Some(4), Mode::Safe, 0.25)
        );
        let before = t;
        for (bad, says) in [
            ("wg=100", "power of two"),
            ("wg=2048", "1..=1024"),
            ("pad=4", "multiple of 8"),
            ("split=0", "1..=16"),
            ("tau=inf", "finite"),
            ("tau=101", "0..=100"),
            ("on=2", "0 or 1"),
            ("mode=slow", "fast, safe"),
            ("wg=-1", "non-negative"),
            ("nope=1", "known: wg, pad, on, tau, split, mode"),
            ("never=1", "unknown knob"),
            ("wg=64,wg=128", "twice"),
            ("wg", "not name=value"),
            ("pad=16,wg=3", "power of two"),
        ] {
            let e = t.apply(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert_eq!(t, before, "{bad} changed the values");
        }
        t.apply("").unwrap();
        assert_eq!(t, before);
    }

    #[test]
    fn validate_names_the_knob_of_values_built_in_code() {
        assert!(base().validate().is_ok());
        let e = Test { wg: 3, ..base() }.validate().unwrap_err();
        assert!(e.starts_with("wg=3:"), "{e}");
        let e = Test {
            split: Some(99),
            ..base()
        }
        .validate()
        .unwrap_err();
        assert!(e.starts_with("split=99:"), "{e}");
        let e = Test {
            tau: f32::NAN,
            ..base()
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("finite"), "{e}");
    }

    #[test]
    fn items_split_and_refuse_duplicates() {
        assert_eq!(items(" a=1, b=2  c=3").unwrap(), [("a", "1"), ("b", "2"), ("c", "3")]);
        assert!(items("a=1,a=2").is_err());
        assert!(items("a").is_err());
        assert!(items(" , ").unwrap().is_empty());
    }
}
