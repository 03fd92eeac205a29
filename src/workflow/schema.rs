//! Custom JSON Schema output contracts (`output_schema` holding a schema): compiling one and
//! checking a value against it. The only place that names the `jsonschema` crate, so the
//! `schema` cargo feature can leave it out: without it every custom schema is refused with an
//! error that says so (`output_schema=routing` needs no schema and always works).
//! Must not touch: where schemas come from or what a failed check does (the lint and
//! [`crate::engine::output`] decide).

use serde_json::Value;

/// A compiled JSON Schema.
pub struct Schema {
    #[cfg(feature = "schema")]
    validator: jsonschema::Validator,
    #[cfg(not(feature = "schema"))]
    never: std::convert::Infallible,
}

/// Why a build without the `schema` feature refuses a custom schema.
#[cfg(not(feature = "schema"))]
pub const NOT_BUILT: &str = "custom JSON Schemas need svc built with the `schema` cargo feature (output_schema=routing works without it)";

/// Compiles `schema` (an object or a boolean).
pub fn compile(schema: &Value) -> Result<Schema, String> {
    if !schema.is_object() && !schema.is_boolean() {
        return Err("a JSON Schema must be an object".to_string());
    }
    #[cfg(feature = "schema")]
    {
        jsonschema::validator_for(schema)
            .map(|validator| Schema { validator })
            .map_err(|e| e.to_string())
    }
    #[cfg(not(feature = "schema"))]
    {
        Err(NOT_BUILT.to_string())
    }
}

/// Parses JSON text and compiles it.
pub fn compile_text(text: &str) -> Result<Schema, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    compile(&value)
}

impl Schema {
    pub fn is_valid(&self, value: &Value) -> bool {
        #[cfg(feature = "schema")]
        {
            self.validator.is_valid(value)
        }
        #[cfg(not(feature = "schema"))]
        {
            let _ = value;
            match self.never {}
        }
    }

    /// Every way `value` fails the schema, each prefixed with the failing instance path.
    pub fn errors(&self, value: &Value) -> Vec<String> {
        #[cfg(feature = "schema")]
        {
            self.validator
                .iter_errors(value)
                .map(|e| {
                    let path = e.instance_path().to_string();
                    if path.is_empty() {
                        e.to_string()
                    } else {
                        format!("{path}: {e}")
                    }
                })
                .collect()
        }
        #[cfg(not(feature = "schema"))]
        {
            let _ = value;
            match self.never {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_non_object_schema_is_refused_in_every_build() {
        let err = compile(&json!("string")).err().unwrap_or_default();
        assert!(err.contains("must be an object"), "{err}");
    }

    #[cfg(feature = "schema")]
    #[test]
    fn a_schema_checks_values_and_names_the_failing_path() {
        let s = compile(&json!({"type":"object","properties":{"n":{"type":"integer"}}}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(s.is_valid(&json!({"n": 3})));
        let errors = s.errors(&json!({"n": "x"}));
        assert!(errors.iter().any(|e| e.starts_with("/n")), "{errors:?}");
    }

    #[cfg(not(feature = "schema"))]
    #[test]
    fn without_the_feature_a_custom_schema_is_refused_with_the_reason() {
        let err = compile(&json!({"type": "object"}))
            .err()
            .unwrap_or_default();
        assert!(err.contains("`schema` cargo feature"), "{err}");
    }
}
