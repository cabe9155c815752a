//! A step's declared attributes (inputs, consts, meta, outputs), their
//! mappings, and their validation.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::*;
use crate::error::{check_len, ValidationError};

/// One declared attribute of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttributeSpec {
    /// `required`, `optional`, `const`, `meta` or `output`; required.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required))]
    pub role: String,
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub attr_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<InputConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<InputConfig>,
    #[serde(rename = "const", default, skip_serializing_if = "Option::is_none")]
    pub const_: Option<ConstConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<MetaConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputConfig>,
}

/// Configuration of a required or optional input.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InputConfig {
    /// Required inputs only: which values of the attribute the step takes.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub match_: Option<ScriptConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping: Option<MappingConfig>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub collect: String,
    /// Optional inputs only: JSON text used when no value arrives.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub default: String,
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub deadline: i64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub for_each: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConstConfig {
    #[serde(default)]
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MetaConfig {
    #[serde(default)]
    pub key: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutputConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping: Option<MappingConfig>,
}

/// Renames an attribute on the wire (`name`: the name the step itself uses),
/// or computes its value (`script`), or both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MappingConfig {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptConfig>,
}

/// How an input gathers the values of several providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collect {
    First,
    Last,
    All,
    Some,
    None,
}

/// The meta values a step may ask for: what differs from call to call, and
/// in a child flow, the work item it runs for (docs/steps.md, "Sub-flows").
pub const META_KEYS: [&str; 7] = [
    "flow_id",
    "step_id",
    "receipt_token",
    "webhook_url",
    "parent_flow_id",
    "parent_step_id",
    "parent_work_item_token",
];

impl AttributeSpec {
    pub fn is_required(&self) -> bool {
        self.role == "required"
    }
    pub fn is_optional(&self) -> bool {
        self.role == "optional"
    }
    pub fn is_input(&self) -> bool {
        self.is_required() || self.is_optional()
    }
    pub fn is_const(&self) -> bool {
        self.role == "const"
    }
    pub fn is_meta(&self) -> bool {
        self.role == "meta"
    }
    pub fn is_output(&self) -> bool {
        self.role == "output"
    }
    /// Passed to the step when it is called.
    pub fn is_runtime_input(&self) -> bool {
        self.is_input() || self.is_const() || self.is_meta()
    }

    fn input_config(&self) -> Option<&InputConfig> {
        match self.role.as_str() {
            "required" => self.required.as_ref(),
            "optional" => self.optional.as_ref(),
            _ => None,
        }
    }

    pub fn mapping(&self) -> Option<&MappingConfig> {
        match self.role.as_str() {
            "output" => self.output.as_ref().and_then(|o| o.mapping.as_ref()),
            _ => self.input_config().and_then(|c| c.mapping.as_ref()),
        }
    }

    pub fn for_each(&self) -> bool {
        self.input_config().is_some_and(|c| c.for_each)
    }

    pub fn collect(&self) -> Collect {
        match self.input_config().map(|c| c.collect.as_str()) {
            Some("last") => Collect::Last,
            Some("all") => Collect::All,
            Some("some") => Collect::Some,
            Some("none") => Collect::None,
            _ => Collect::First,
        }
    }

    /// The optional input's default as JSON, if it has one.
    pub fn default_value(&self) -> Option<Value> {
        let text = self.optional.as_ref().map(|c| c.default.as_str())?;
        if text.is_empty() {
            return None;
        }
        serde_json::from_str(text).ok()
    }

    pub fn const_value(&self) -> Option<Value> {
        let text = self.const_.as_ref().map(|c| c.value.as_str())?;
        serde_json::from_str(text).ok()
    }

    pub fn meta_key(&self) -> &str {
        self.meta.as_ref().map(|m| m.key.as_str()).unwrap_or("")
    }

    pub(super) fn validate(&self, name: &str) -> Result<(), ValidationError> {
        let field = format!("attributes.{name}");
        let roles = ["required", "optional", "const", "meta", "output"];
        if !roles.contains(&self.role.as_str()) {
            return Err(ValidationError::new(
                format!("{field}.role"),
                format!(
                    "invalid attribute role: {:?} (must be required, optional, const, meta or output)",
                    self.role
                ),
            ));
        }
        if !self.attr_type.is_empty() && !ATTRIBUTE_TYPES.contains(&self.attr_type.as_str()) {
            return Err(ValidationError::new(
                format!("{field}.type"),
                format!("invalid attribute type: {:?}", self.attr_type),
            ));
        }
        let configs = [
            ("required", self.required.is_some()),
            ("optional", self.optional.is_some()),
            ("const", self.const_.is_some()),
            ("meta", self.meta.is_some()),
            ("output", self.output.is_some()),
        ];
        for (role, set) in configs {
            if set && role != self.role {
                return Err(ValidationError::new(
                    format!("{field}.{role}"),
                    format!("config type does not match attribute role {:?}", self.role),
                ));
            }
        }
        if let Some(cfg) = self.input_config() {
            self.validate_input(&field, cfg)?;
        }
        if self.is_const() {
            let value = self.const_.as_ref().map(|c| c.value.as_str()).unwrap_or("");
            if value.is_empty() {
                return Err(ValidationError::new(
                    format!("{field}.const.value"),
                    "const value required for const attribute",
                ));
            }
            check_typed_json(&format!("{field}.const.value"), value, &self.attr_type)?;
        }
        if self.is_meta() {
            let key = self.meta_key();
            if key.is_empty() {
                return Err(ValidationError::new(
                    format!("{field}.meta.key"),
                    "meta key required for meta attribute",
                ));
            }
            if !META_KEYS.contains(&key) {
                return Err(ValidationError::new(
                    format!("{field}.meta.key"),
                    format!(
                        "unknown meta key {key:?} (must be one of {})",
                        META_KEYS.join(", ")
                    ),
                ));
            }
        }
        if let Some(m) = self.output.as_ref().and_then(|o| o.mapping.as_ref()) {
            validate_mapping(&format!("{field}.output.mapping"), m)?;
        }
        Ok(())
    }

    fn validate_input(&self, field: &str, cfg: &InputConfig) -> Result<(), ValidationError> {
        let field = format!("{field}.{}", self.role);
        if cfg.for_each && !matches!(self.attr_type.as_str(), "" | "array" | "any") {
            return Err(ValidationError::new(
                format!("{field}.for_each"),
                format!(
                    "for_each processing requires an array attribute type, not {}",
                    self.attr_type
                ),
            ));
        }
        if !cfg.collect.is_empty()
            && !["first", "last", "all", "some", "none"].contains(&cfg.collect.as_str())
        {
            return Err(ValidationError::new(
                format!("{field}.collect"),
                format!(
                    "invalid input collect: {:?} (must be first, last, all, some or none)",
                    cfg.collect
                ),
            ));
        }
        if cfg.match_.is_some() && !self.is_required() {
            return Err(ValidationError::new(
                format!("{field}.match"),
                "only required inputs have a match",
            ));
        }
        if self.is_required() && !cfg.default.is_empty() {
            return Err(ValidationError::new(
                format!("{field}.default"),
                "only optional inputs have a default",
            ));
        }
        if !cfg.default.is_empty() {
            check_typed_json(&format!("{field}.default"), &cfg.default, &self.attr_type)?;
        }
        if cfg.deadline < 0 || cfg.deadline > 365 * 24 * 3600 * 1000 {
            return Err(ValidationError::new(
                format!("{field}.deadline"),
                "deadline must be between 0 and 1 year in milliseconds",
            ));
        }
        if cfg.deadline > 0 && !self.is_optional() {
            return Err(ValidationError::new(
                format!("{field}.deadline"),
                "only optional inputs have a deadline",
            ));
        }
        if let Some(m) = &cfg.mapping {
            validate_mapping(&format!("{field}.mapping"), m)?;
        }
        Ok(())
    }
}

pub(super) fn validate_mapping(field: &str, m: &MappingConfig) -> Result<(), ValidationError> {
    if m.name.is_empty() && m.script.is_none() {
        return Err(ValidationError::new(
            field,
            "invalid attribute mapping: name or script required",
        ));
    }
    check_len(&format!("{field}.name"), &m.name)
}

/// A default or const value is JSON text that must fit the declared type.
pub(super) fn check_typed_json(field: &str, text: &str, attr_type: &str) -> Result<(), ValidationError> {
    // The value ends up in flow state, which must stay readable.
    if crate::nesting::is_too_deep(text.as_bytes()) {
        return Err(ValidationError::new(field, crate::nesting::too_deep_message()));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|_| ValidationError::new(field, "invalid default value for type: must be valid JSON"))?;
    let ok = match attr_type {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            field,
            format!("invalid default value for type: must be a valid JSON {attr_type}"),
        ))
    }
}
