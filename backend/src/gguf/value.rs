//! Metadata values: scalars, strings and arrays held as typed vectors, and the ordered key-value
//! list of a file.

use super::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GgufError, Result};

macro_rules! define_values {
    ($($variant:ident($ty:ty) = $id:literal, $what:literal, $as_slice:ident;)*) => {
        /// The type of a metadata value, with its GGUF id.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ValueType { $($variant,)* Bool, String, Array }

        impl ValueType {
            /// The GGUF id of the type.
            pub fn id(self) -> u32 {
                match self {
                    $(ValueType::$variant => $id,)*
                    ValueType::Bool => 7,
                    ValueType::String => 8,
                    ValueType::Array => 9,
                }
            }

            /// The type with this GGUF id.
            pub fn from_id(id: u32) -> Option<ValueType> {
                match id {
                    $($id => Some(ValueType::$variant),)*
                    7 => Some(ValueType::Bool),
                    8 => Some(ValueType::String),
                    9 => Some(ValueType::Array),
                    _ => None,
                }
            }
        }

        /// A metadata value.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Value { $($variant($ty),)* Bool(bool), String(String), Array(Array) }

        impl Value {
            /// The value's type.
            pub fn ty(&self) -> ValueType {
                match self {
                    $(Value::$variant(_) => ValueType::$variant,)*
                    Value::Bool(_) => ValueType::Bool,
                    Value::String(_) => ValueType::String,
                    Value::Array(_) => ValueType::Array,
                }
            }
        }

        $(impl From<$ty> for Value {
            fn from(v: $ty) -> Value {
                Value::$variant(v)
            }
        })*

        /// A metadata array: its elements as one vector of their type, so that it takes about
        /// the memory its bytes take in the file (the element type is the variant's, so an empty
        /// array keeps it). The elements of an array of arrays may differ in type, as in GGUF.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Array {
            $($variant(Vec<$ty>),)*
            Bool(Vec<bool>),
            String(Vec<String>),
            Array(Vec<Array>),
        }

        impl Array {
            /// An empty array of `ty`.
            pub fn empty(ty: ValueType) -> Array {
                match ty {
                    $(ValueType::$variant => Array::$variant(Vec::new()),)*
                    ValueType::Bool => Array::Bool(Vec::new()),
                    ValueType::String => Array::String(Vec::new()),
                    ValueType::Array => Array::Array(Vec::new()),
                }
            }

            /// The type of the elements.
            pub fn element_type(&self) -> ValueType {
                match self {
                    $(Array::$variant(_) => ValueType::$variant,)*
                    Array::Bool(_) => ValueType::Bool,
                    Array::String(_) => ValueType::String,
                    Array::Array(_) => ValueType::Array,
                }
            }

            /// The number of elements.
            pub fn len(&self) -> usize {
                match self {
                    $(Array::$variant(v) => v.len(),)*
                    Array::Bool(v) => v.len(),
                    Array::String(v) => v.len(),
                    Array::Array(v) => v.len(),
                }
            }

            /// Whether there are no elements.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// Element `i` as a value of its own (a copy).
            pub fn get(&self, i: usize) -> Option<Value> {
                match self {
                    $(Array::$variant(v) => v.get(i).map(|&x| Value::$variant(x)),)*
                    Array::Bool(v) => v.get(i).map(|&b| Value::Bool(b)),
                    Array::String(v) => v.get(i).map(|s| Value::String(s.clone())),
                    Array::Array(v) => v.get(i).map(|a| Value::Array(a.clone())),
                }
            }

            $(
                #[doc = concat!("The elements, for an array of `", stringify!($ty), "`.")]
                pub fn $as_slice(&self) -> Option<&[$ty]> {
                    match self {
                        Array::$variant(v) => Some(v),
                        _ => None,
                    }
                }
            )*
        }

        $(impl From<Vec<$ty>> for Array {
            fn from(v: Vec<$ty>) -> Array {
                Array::$variant(v)
            }
        })*
    };
}

fixed_types!(define_values);

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_owned())
    }
}

impl From<Array> for Value {
    fn from(a: Array) -> Value {
        Value::Array(a)
    }
}

impl From<Vec<bool>> for Array {
    fn from(v: Vec<bool>) -> Array {
        Array::Bool(v)
    }
}

impl From<Vec<String>> for Array {
    fn from(v: Vec<String>) -> Array {
        Array::String(v)
    }
}

impl From<Vec<Array>> for Array {
    fn from(v: Vec<Array>) -> Array {
        Array::Array(v)
    }
}

impl Array {
    /// The elements, for an array of bools.
    pub fn as_bool_slice(&self) -> Option<&[bool]> {
        match self {
            Array::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The elements, for an array of strings.
    pub fn as_str_slice(&self) -> Option<&[String]> {
        match self {
            Array::String(v) => Some(v),
            _ => None,
        }
    }

    /// The elements, for an array of arrays.
    pub fn as_array_slice(&self) -> Option<&[Array]> {
        match self {
            Array::Array(v) => Some(v),
            _ => None,
        }
    }

    /// The elements as `u64`s, for an array of integers none of which is negative.
    pub fn to_u64_vec(&self) -> Option<Vec<u64>> {
        fn all<T: Copy>(v: &[T]) -> Option<Vec<u64>>
        where
            u64: TryFrom<T>,
        {
            v.iter().map(|&x| u64::try_from(x).ok()).collect()
        }
        match self {
            Array::U8(v) => all(v),
            Array::I8(v) => all(v),
            Array::U16(v) => all(v),
            Array::I16(v) => all(v),
            Array::U32(v) => all(v),
            Array::I32(v) => all(v),
            Array::U64(v) => all(v),
            Array::I64(v) => all(v),
            _ => None,
        }
    }

    /// The elements as `f64`s, for an array of floats.
    pub fn to_f64_vec(&self) -> Option<Vec<f64>> {
        match self {
            Array::F32(v) => Some(v.iter().map(|&x| x.into()).collect()),
            Array::F64(v) => Some(v.clone()),
            _ => None,
        }
    }
}

impl Value {
    /// The string, for a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a `u64`, for any non-negative integer value.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => v.try_into().ok(),
            Value::I16(v) => v.try_into().ok(),
            Value::I32(v) => v.try_into().ok(),
            Value::I64(v) => v.try_into().ok(),
            _ => None,
        }
    }

    /// The value as an `f64`, for a float value.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a bool, for a bool value.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The array, for an array value.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Metadata: key-value pairs in file order, keys unique.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    pub(super) entries: Vec<(String, Value)>,
}

impl Metadata {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The string value of `key`, if it is a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// The array value of `key`, if it is an array.
    pub fn get_array(&self, key: &str) -> Option<&Array> {
        self.get(key).and_then(Value::as_array)
    }

    /// Sets `key`, in place if present (keeping its position), else at the end. Returns the old value.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) -> Option<Value> {
        let key = key.into();
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => Some(std::mem::replace(v, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// The pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The alignment `general.alignment` asks for, or [`DEFAULT_ALIGNMENT`].
    pub fn alignment(&self) -> Result<usize> {
        match self.get(ALIGNMENT_KEY) {
            None => Ok(DEFAULT_ALIGNMENT),
            Some(&Value::U32(a)) if a.is_power_of_two() => Ok(a as usize),
            Some(other) => Err(GgufError::BadAlignment(format!("{other:?}"))),
        }
    }
}
