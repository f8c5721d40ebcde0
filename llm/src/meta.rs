//! Typed reads of GGUF metadata, and the array values the writers need.
//!
//! The only module that knows how [`ggml_dawn::gguf::Value`] holds arrays, so that a change of that
//! representation touches one file. A value of the wrong type is an error naming the key; an
//! absent key is `Ok(None)`.

use ggml_dawn::gguf::{Array, Metadata, Value, ValueType};

use crate::error::{LlmError, Result};

fn bad(key: &str, reason: impl Into<String>) -> LlmError {
    LlmError::Metadata {
        key: key.to_owned(),
        reason: reason.into(),
    }
}

/// A non-negative integer of any width that fits in `u32`.
pub fn get_u32(meta: &Metadata, key: &str) -> Result<Option<u32>> {
    let Some(value) = meta.get(key) else {
        return Ok(None);
    };
    if let Some(items) = value.as_array() {
        return Err(bad(
            key,
            format!(
                "an array of {} values where one integer was expected (per-layer values are not supported)",
                items.len()
            ),
        ));
    }
    match value.as_u64().map(u32::try_from) {
        Some(Ok(v)) => Ok(Some(v)),
        _ => Err(bad(
            key,
            format!("expected a non-negative 32-bit integer, found {value:?}"),
        )),
    }
}

/// A float (f32 or f64, read as f32).
pub fn get_f32(meta: &Metadata, key: &str) -> Result<Option<f32>> {
    let Some(value) = meta.get(key) else {
        return Ok(None);
    };
    match value.as_f64() {
        Some(v) => Ok(Some(v as f32)),
        None => Err(bad(key, format!("expected a float, found {value:?}"))),
    }
}

/// A bool.
pub fn get_bool(meta: &Metadata, key: &str) -> Result<Option<bool>> {
    let Some(value) = meta.get(key) else {
        return Ok(None);
    };
    match value.as_bool() {
        Some(v) => Ok(Some(v)),
        None => Err(bad(key, format!("expected a bool, found {value:?}"))),
    }
}

/// A string.
pub fn get_str<'a>(meta: &'a Metadata, key: &str) -> Result<Option<&'a str>> {
    let Some(value) = meta.get(key) else {
        return Ok(None);
    };
    match value.as_str() {
        Some(v) => Ok(Some(v)),
        None => Err(bad(key, format!("expected a string, found a {:?}", value.ty()))),
    }
}

fn get_array<'a>(meta: &'a Metadata, key: &str, want: &[ValueType]) -> Result<Option<&'a Array>> {
    let Some(value) = meta.get(key) else {
        return Ok(None);
    };
    match value.as_array() {
        Some(items) if want.contains(&items.element_type()) => Ok(Some(items)),
        Some(items) => Err(bad(
            key,
            format!("expected an array of {want:?}, found one of {:?}", items.element_type()),
        )),
        None => Err(bad(key, format!("expected an array, found a {:?}", value.ty()))),
    }
}

/// The length of an array of any type.
pub fn array_len(meta: &Metadata, key: &str) -> Option<usize> {
    meta.get(key).and_then(Value::as_array).map(Array::len)
}

/// An array of strings.
pub fn get_str_array(meta: &Metadata, key: &str) -> Result<Option<Vec<String>>> {
    let Some(items) = get_array(meta, key, &[ValueType::String])? else {
        return Ok(None);
    };
    Ok(items.as_str_slice().map(<[String]>::to_vec))
}

/// An array of f32 (or i32, converted, as llama.cpp accepts for scores).
pub fn get_f32_array(meta: &Metadata, key: &str) -> Result<Option<Vec<f32>>> {
    let Some(items) = get_array(meta, key, &[ValueType::F32, ValueType::I32])? else {
        return Ok(None);
    };
    Ok(match (items.as_f32_slice(), items.as_i32_slice()) {
        (Some(v), _) => Some(v.to_vec()),
        (_, Some(v)) => Some(v.iter().map(|&x| x as f32).collect()),
        _ => None,
    })
}

/// An array of i32.
pub fn get_i32_array(meta: &Metadata, key: &str) -> Result<Option<Vec<i32>>> {
    let Some(items) = get_array(meta, key, &[ValueType::I32])? else {
        return Ok(None);
    };
    Ok(items.as_i32_slice().map(<[i32]>::to_vec))
}

/// A string array value, for writing.
pub fn str_array(items: Vec<String>) -> Value {
    Value::Array(Array::from(items))
}

/// An f32 array value, for writing.
pub fn f32_array(items: &[f32]) -> Value {
    Value::Array(Array::from(items.to_vec()))
}

/// An i32 array value, for writing.
pub fn i32_array(items: &[i32]) -> Value {
    Value::Array(Array::from(items.to_vec()))
}
